"""The board's fast paths give the files' answer. Outlines, listings and claim decisions read
through the cache file (a fresh store, as each command starts) and through a long-lived
store's file watches (a server's) equal those of a full scan of the files, on generated boards
and after random hand edits (in place, keeping size and mtime), adds, deletes, renames,
conflict markers and links; an edit made just before a claim is always seen; a claim appends
to the cache file and never rewrites it; one owner per task under processes claiming at once."""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import typing
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from board_support import activity_files, activity_lines
from helpers import wait_for

from moss_files.board import claims, files, queries, rules, shapes
from moss_files.board.model import (
    ACTIVE,
    CREATORS,
    GONE_WORKER_STATUSES,
    PRIORITIES,
    STATUSES,
    Board,
    Epic,
    Step,
    Task,
    Team,
    Worker,
    board_key,
    default_project,
    is_valid_name,
)
from moss_files.board.store import (
    CACHE_FILE,
    CACHE_REWRITE_AFTER,
    CHECK_TRUSTED_NS,
    KEEP_OUT_OF_COLLECTIONS_AT,
    OUTLINE_FIELDS,
    BoardStore,
    Head,
    racy_window,
)
from moss_files.board.usecase import STORE_KEY, board_store
from moss_files.foundation import document, fs, inotify
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import Conflict, MossError

NOW = datetime(2026, 1, 21, 12, 0, tzinfo=UTC)
STAMP = "2026-01-21T10:00:00Z"
CLAIMS = (("WORKING",), ("PLANNING",), ("REVIEW",), ("PLANNING", "WORKING", "REVIEW"))
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "rho")


def fixed_clock() -> datetime:
    return NOW


def stamp(minutes: int) -> str:
    return (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- the reference: a full scan


PARSERS: dict[str, Callable[..., Any]] = {"epics": files.parse_epic, "tasks": files.parse_task, "workers": files.parse_worker, "teams": files.parse_team}


def scan(root: Path) -> Board:
    """Every board file read and parsed, with none of the store's machinery."""
    base = root / ".moss" / "board"
    problems: list[MossError] = []
    try:
        project = files.parse_project(fs.read_document(base / "project.md"), ".moss/board/project.md", default_name=root.name)
    except MossError as err:
        problems.append(err)
        project = None
    found: dict[str, dict[str, Any]] = {}
    for folder, parse in PARSERS.items():
        found[folder] = {}
        directory = base / folder
        for name in sorted(os.listdir(directory)) if directory.is_dir() else ():
            shown = f".moss/board/{folder}/{name}"
            if name.startswith(".") or not name.endswith(".md"):
                continue
            stem = name[:-3]
            try:
                if not is_valid_name(stem):
                    raise MossError("not a board file name", path=shown, code="SCHEMA_ERROR")
                doc = document.parse_bytes(fs.read_bytes(directory / name), shown)
                found[folder][stem] = parse(doc, shown, fallback_id=stem)
            except MossError as err:
                problems.append(err)
    assert project is not None
    return Board(project, found["epics"], found["tasks"], found["workers"], found["teams"], tuple(problems))


def problem_set(board: Board) -> set[tuple[str, str]]:
    """Each unreadable file (folder and name) with its code."""
    return {("/".join(Path(str(err.path)).parts[-2:]), err.code) for err in board.problems}


def outline_of(task: Task) -> dict[str, Any]:
    return {name: getattr(task, name) for name in OUTLINE_FIELDS}


def expected_outline_ids(full: Board, statuses: tuple[str, ...] | None) -> set[str]:
    chosen = {i for i, t in full.tasks.items() if statuses is None or t.status in statuses or (t.assigned_worker and t.status in ACTIVE)}
    return chosen | {dep for i in chosen for dep in full.tasks[i].depends_on if dep in full.tasks}


def outcome(action: Callable[[], rules.ClaimPlan]) -> tuple[Any, ...]:
    try:
        plan = action()
    except Conflict as err:
        return ("error", err.code, err.details.get("taskId"))
    return ("plan", plan.task.id if plan.task else None, plan.takeover_from, plan.already.id if plan.already else None)


def assert_same(board: Board, full: Board, statuses: tuple[str, ...] | None, *, workers: list[str | None], epics: list[str | None]) -> None:
    """`board` (an outline of `statuses`) holds what the full scan says, and every claim decision
    over it is the full scan's."""
    assert problem_set(board) == problem_set(full)
    assert board.epics == full.epics and board.workers == full.workers and board.teams == full.teams and board.project == full.project
    assert set(board.tasks) == expected_outline_ids(full, statuses)
    for task_id, task in board.tasks.items():
        assert outline_of(task) == outline_of(full.tasks[task_id]), task_id
    for wanted in CLAIMS:
        if statuses is not None and not set(wanted) <= set(statuses):
            continue
        for worker in workers:
            for epic in epics:
                for take_over in (False, True):

                    def decide(
                        on: Board, wanted: tuple[str, ...] = wanted, worker: str | None = worker, epic: str | None = epic, take: bool = take_over
                    ) -> rules.ClaimPlan:
                        return rules.plan_claim(on, wanted, worker, epic_id=epic, replace_existing=take)

                    assert outcome(lambda: decide(board)) == outcome(lambda: decide(full)), (wanted, worker, epic, take_over)


def expected_list(full: Board) -> dict[str, Any]:
    shown = sorted((t for t in full.tasks.values() if t.status != "ARCHIVED"), key=lambda t: board_key(t, full.epics))
    return {"epicId": None, "epicTitle": None, "tasks": [shapes.task_brief(t) for t in shown], "counts": shapes.list_counts(full.tasks.values())}


# --------------------------------------------------------------------------- generated boards


def random_value(rng: random.Random, hint: Any) -> Any:
    """A value of a task field's type, for the fields outlines leave out (and any field added
    later): a rule that reads one of them from an outline then decides differently."""
    if hint is bool:
        return rng.random() < 0.5
    if hint is int or hint == int | float:
        return rng.randrange(0, 5)
    if hint is str:
        return rng.choice(WORDS)
    args = typing.get_args(hint)
    if type(None) in args:
        return None if rng.random() < 0.5 else random_value(rng, next(a for a in args if a is not type(None)))
    origin = typing.get_origin(hint)
    if origin is tuple and args and args[0] is str:
        return tuple(rng.sample(WORDS, rng.randrange(0, 3)))
    if origin is tuple and args and args[0] is Step:
        return tuple(
            Step(f"step-{n}", f"{rng.choice(WORDS)} step", rng.choice(("PENDING", "COMPLETED")), (f"src/{rng.choice(WORDS)}.py",))
            for n in range(1, rng.randrange(1, 4))
        )
    if origin is tuple:
        return tuple({"note": rng.choice(WORDS)} for _ in range(rng.randrange(0, 2)))
    if typing.get_origin(hint) is not None or hint is typing.Any or "Mapping" in str(hint):
        return {"by": rng.choice(WORDS)}
    return None


def random_task(rng: random.Random, task_id: str, epics: list[str], workers: list[str], ids: list[str]) -> Task:
    hints = typing.get_type_hints(Task)
    values: dict[str, Any] = {f.name: random_value(rng, hints[f.name]) for f in fields(Task) if f.name not in ("id", "epic", "title")}
    status = rng.choice(STATUSES)
    values.update(
        status=status,
        priority=rng.choice(PRIORITIES),
        order=rng.randrange(0, 6),
        assigned_worker=rng.choice([*workers, "ghost", None, None]) if status in ACTIVE else None,
        depends_on=tuple(rng.sample(ids, min(len(ids), rng.choice((0, 0, 0, 1, 2))))) + (("TASK-missing",) if rng.random() < 0.05 else ()),
        parent=rng.choice([None, *ids[:3]]),
        created_by=rng.choice(CREATORS),
        reopen_count=rng.randrange(0, 3),
        budget_ms=rng.choice([None, 60000]),
        **{
            name: rng.choice([None, stamp(rng.randrange(0, 600))]) for name in ("first_claimed", "plan_approved", "work_started", "review_started", "completed")
        },
        created=stamp(rng.randrange(0, 6000)),
        updated=stamp(rng.randrange(0, 60)),
        plan_submitted=stamp(rng.randrange(0, 90)) if status == "AWAITING_APPROVAL" else None,
        description=f"{rng.choice(WORDS)} description",
    )
    return Task(id=task_id, epic=rng.choice([*epics, "EPIC-gone"]), title=f"task {task_id} {rng.choice(WORDS)}", **values)


class Generated:
    """A generated board in a workspace, and the random hand edits made to it."""

    def __init__(self, root: Path, seed: int, *, tasks: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.base = root / ".moss" / "board"
        for folder in ("epics", "tasks", "workers", "teams"):
            (self.base / folder).mkdir(parents=True, exist_ok=True)
        (self.base / "project.md").write_text(files.render_project(default_project("Generated")))
        self.epics = [f"EPIC-{n}" for n in range(6)]
        self.workers = [f"w{n:02d}" for n in range(10)]
        for n, epic_id in enumerate(self.epics):
            self.write(
                "epics", epic_id, files.render_epic(Epic(epic_id, f"Epic {n}", status="ARCHIVED" if n == 5 else "ACTIVE", order=self.rng.randrange(0, 4)))
            )
        for n, worker in enumerate(self.workers):
            status = "DEAD" if n == 8 else ("STALE" if n == 9 else None)
            self.write("workers", worker, files.render_worker(Worker(worker, type="worker", status=status, heartbeat=stamp(1), created=STAMP, updated=STAMP)))
        self.write("teams", "TEAM-a", files.render_team(Team("TEAM-a", "A", role="worker", members=tuple(self.workers[:3]))))
        self.write("teams", "TEAM-b", files.render_team(Team("TEAM-b", "B", members=tuple(self.workers[3:5]))))
        self.ids: list[str] = []
        for n in range(tasks):
            self.add_task(f"TASK-{n:04d}")

    def write(self, folder: str, item_id: str, text: str) -> Path:
        path = self.base / folder / f"{item_id}.md"
        path.write_text(text)
        return path

    def add_task(self, task_id: str) -> None:
        self.write("tasks", task_id, files.render_task(random_task(self.rng, task_id, self.epics, self.workers, self.ids)))
        self.ids.append(task_id)

    def task_paths(self) -> list[Path]:
        return sorted(p for p in (self.base / "tasks").iterdir() if p.suffix == ".md" and not p.name.startswith(".") and not p.is_symlink())

    def edit_in_place(self, path: Path) -> None:
        """Rewrite a task in place as another random task of the same id, keeping the file's
        inode, its size (padding the description) where the new text is not longer, and its
        mtime to the nanosecond: only the bytes and the ctime differ."""
        info = path.stat()
        text = files.render_task(random_task(self.rng, path.stem, self.epics, self.workers, self.ids))
        data = text.encode()
        if len(data) < info.st_size:
            data = data[:-1] + b" " * (info.st_size - len(data)) + b"\n"
        with path.open("r+b") as handle:
            handle.write(data)
            handle.truncate()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))

    def mutate(self) -> None:
        """A round of hand edits of every sort a person or git makes."""
        rng = self.rng
        paths = self.task_paths()
        for path in rng.sample(paths, 6):
            self.edit_in_place(path)
        for path in rng.sample(paths, 3):  # replaced by rename, as editors and git do
            temp = path.with_name(f".{path.name}.swp")
            temp.write_text(files.render_task(random_task(rng, path.stem, self.epics, self.workers, self.ids)))
            os.replace(temp, path)
        victim = rng.choice(paths)
        victim.unlink()
        self.add_task(f"TASK-{len(self.ids):04d}")
        moved = rng.choice(self.task_paths())
        moved.rename(moved.with_name(f"TASK-r{len(self.ids):04d}.md"))  # its `id:` no longer matches: a problem
        if rng.random() < 0.5:
            epic = self.base / "epics" / f"{rng.choice(self.epics)}.md"
            epic.write_text(epic.read_text().replace("status: ACTIVE", "status: ARCHIVED"))
        worker = self.base / "workers" / f"{rng.choice(self.workers[:8])}.md"
        worker.write_text(files.render_worker(Worker(worker.stem, status=rng.choice([None, "DEAD", "STALE", "BLOCKED"]), heartbeat=stamp(2))))
        team = self.base / "teams" / "TEAM-b.md"
        team.write_text(files.render_team(Team("TEAM-b", "B", members=tuple(rng.sample(self.workers, 2)))))
        broken = rng.choice(self.task_paths())
        broken.write_text(broken.read_text().replace("title:", "<<<<<<< ours\ntitle:", 1))
        linked = rng.choice(self.task_paths())
        linked.unlink()
        linked.symlink_to(rng.choice(self.task_paths()))
        (self.base / "tasks" / "no good.md").write_text("---\ntitle: x\n---\n")
        (self.base / "tasks" / "notes.txt").write_text("not a task\n")


def workers_to_ask(gen: Generated, full: Board) -> list[str | None]:
    holders = sorted({t.assigned_worker for t in full.tasks.values() if t.assigned_worker})
    return [None, gen.workers[0], gen.workers[3], gen.workers[8], "newcomer", *holders[:2]]


def fresh(root: Path) -> Context:
    return Context(root, actor=AGENT, clock=fixed_clock)


# --------------------------------------------------------------------------- equivalence


def test_outlines_and_claim_decisions_equal_the_full_scan_through_the_cache_file_and_the_watches(tmp_path: Path) -> None:
    gen = Generated(tmp_path / "project", seed=18, tasks=160)
    long_lived = BoardStore(gen.root)
    for round_number in range(10):
        full = scan(gen.root)
        asked_workers = workers_to_ask(gen, full)
        asked_epics: list[str | None] = [None, gen.epics[0], gen.epics[5]]
        for statuses in (None, ("WORKING", "AWAITING_APPROVAL"), ("PLANNING", "WORKING", "REVIEW", "AWAITING_APPROVAL"), ()):
            for store in (BoardStore(gen.root), long_lived):  # a command's, and a server's
                assert_same(store.outline(statuses), full, statuses, workers=asked_workers, epics=asked_epics)
        for store in (BoardStore(gen.root), long_lived, BoardStore(gen.root, persist=False)):
            loaded = store.load()
            assert loaded.tasks == full.tasks and problem_set(loaded) == problem_set(full)
        assert (gen.root / CACHE_FILE).exists()
        if round_number == 1 and inotify.local_file_system(str(tmp_path)):
            assert long_lived._watch is not None  # the server's store answers from file events now
        for ctx in (fresh(gen.root), Context(gen.root, actor=AGENT, clock=fixed_clock)):
            assert queries.list_tasks(ctx) | {"problems": None} == expected_list(full) | {"problems": None}
        # A claim through the use case (fresh context, cache file) gives what the scan decides.
        worker = gen.rng.choice([w for w in gen.workers if w in full.workers and full.workers[w].status not in GONE_WORKER_STATUSES])
        statuses = gen.rng.choice(CLAIMS)
        expected = outcome(lambda: rules.plan_claim(full, statuses, worker))
        try:
            result = claims.claim_next_task(fresh(gen.root), statuses=list(statuses), worker_id=worker)
            got = (
                "plan",
                result["task"]["id"] if result["hasNext"] else None,
                result.get("takenOverFrom"),
                (result.get("alreadyAssigned") or {}).get("taskId"),
            )
        except Conflict as err:
            got = ("error", err.code, err.details.get("taskId"))
        assert got == expected
        gen.mutate()
    long_lived.close()


def test_a_watching_store_s_kept_outline_patched_by_writes_equals_a_fresh_one_in_order(tmp_path: Path) -> None:
    """A server's store keeps its last outline of some statuses and patches it where the files
    named since keep their places (a claim's writes: a task of the asked statuses held, still
    there; a dependency edited); a write that adds, removes or moves one, or changes a task's
    dependencies, makes it anew. Either way it equals a new store's, in name order too."""
    gen = Generated(tmp_path / "project", seed=29, tasks=120)
    statuses = ("WORKING", "AWAITING_APPROVAL")
    long_lived = BoardStore(gen.root)
    long_lived.outline(statuses)
    long_lived.outline(statuses)  # watching from here on
    if long_lived._watch is None:
        pytest.skip("no file watches on this file system")
    patched = 0
    for round_number in range(30):
        before = long_lived.outline(statuses).tasks
        kept = long_lived._watch.listing["task"].selections[frozenset(statuses)]
        answer = kept.answer
        chosen = sorted(task_id for task_id, task in before.items() if task.status in statuses)
        dependencies = sorted({dep for task in before.values() for dep in task.depends_on} & set(before) - set(chosen))
        rng = gen.rng
        for task_id in rng.sample(chosen, 3):  # held by another worker, retitled: in place
            long_lived.update("task", task_id, lambda t: replace(t, assigned_worker=rng.choice(gen.workers), title=f"{t.title}+"))
        if dependencies:
            long_lived.update("task", rng.choice(dependencies), lambda t: replace(t, title=f"{t.title}!"))
        moves = round_number % 3 == 2
        if moves:  # a status, or the dependencies, changed: the answer is made anew
            long_lived.update(
                "task", rng.choice(chosen), lambda t: replace(t, status="REVIEW") if rng.random() < 0.5 else replace(t, depends_on=(*t.depends_on, chosen[0]))
            )
        got = long_lived.outline(statuses).tasks
        assert list(got.items()) == list(BoardStore(gen.root, persist=False).outline(statuses).tasks.items())
        if not moves and kept.answer is answer:
            patched += 1
    assert patched >= 15
    long_lived.close()


def test_a_fresh_store_takes_unchanged_files_from_the_cache_file(tmp_path: Path) -> None:
    gen = Generated(tmp_path / "project", seed=5, tasks=120)
    settle(gen.root)
    BoardStore(gen.root).load()
    store = BoardStore(gen.root)
    store.outline(("WORKING",))
    assert store._parsed <= 1  # project.md only: every other file's stat matched the cache file
    path = gen.task_paths()[7]
    gen.edit_in_place(path)
    again = BoardStore(gen.root)
    assert again.load().tasks[path.stem] == scan(gen.root).tasks[path.stem]
    assert again._parsed <= 2


def settle(root: Path) -> None:
    """Wait until no board file is too recent for its stat to be trusted, as after a checkout."""
    paths = [p for p in (root / ".moss" / "board").rglob("*.md") if not p.is_symlink()]

    def aged() -> bool:
        now = time.time_ns()
        return all(now - (st := p.stat()).st_ctime_ns >= racy_window(st.st_mtime_ns, st.st_ctime_ns) for p in paths)

    wait_for(aged, timeout=5, message="files older than the racy window")


def claim_result(ctx: Context, worker: str) -> str | None:
    result = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)
    return result["task"]["id"] if result["hasNext"] else None


def two_tasks(root: Path) -> tuple[Path, Path]:
    gen_root = root / ".moss" / "board"
    (gen_root / "epics").mkdir(parents=True)
    (gen_root / "tasks").mkdir()
    (gen_root / "epics" / "EPIC-1.md").write_text(files.render_epic(Epic("EPIC-1", "E", order=1)))
    first = gen_root / "tasks" / "TASK-a.md"
    second = gen_root / "tasks" / "TASK-b.md"
    first.write_text(files.render_task(Task("TASK-a", "EPIC-1", "first", status="WORKING", priority="CRITICAL", created=STAMP)))
    second.write_text(files.render_task(Task("TASK-b", "EPIC-1", "second", status="WORKING", priority="LOW", created=STAMP)))
    for n in range(CACHE_REWRITE_AFTER):  # enough for a cache file
        (gen_root / "tasks" / f"TASK-x{n:03d}.md").write_text(files.render_task(Task(f"TASK-x{n:03d}", "EPIC-1", "done", status="DONE", created=STAMP)))
    return first, second


def same_size_edit(path: Path, old: str, new: str) -> None:
    """Edit in place keeping size and mtime (to the nanosecond): only bytes and ctime change."""
    assert len(old) == len(new)
    info = path.stat()
    data = path.read_bytes()
    with path.open("r+b") as handle:
        handle.write(data.replace(old.encode(), new.encode(), 1))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (info.st_ino, info.st_size, info.st_mtime_ns)


@pytest.mark.parametrize("store_kind", ["fresh", "long-lived", "no cache file"])
def test_an_edit_keeping_size_and_mtime_just_before_a_claim_is_seen(repo: Path, store_kind: str) -> None:
    first, _second = two_tasks(repo)
    settle(repo)
    server = Context(repo, actor=AGENT)
    if store_kind == "no cache file":
        server.resource(STORE_KEY, lambda: BoardStore(repo, persist=False))
    for _ in range(3):  # the cache file is written; a server's store watches by now
        board_store_load(server)
    assert (repo / CACHE_FILE).exists() == (store_kind != "no cache file")
    for round_number in range(20):
        ctx = server if store_kind != "fresh" else Context(repo, actor=AGENT)
        if store_kind == "fresh":
            board_store_load(ctx)  # read just now: the file may still be in the racy window
        same_size_edit(first, "status: WORKING", "status: BACKLOG")
        assert claim_result(ctx, f"w{round_number}") == "TASK-b"
        claims.release_task(Context(repo), task_id="TASK-b")
        same_size_edit(first, "status: BACKLOG", "status: WORKING")
        assert claim_result(Context(repo, actor=AGENT) if store_kind == "fresh" else ctx, f"v{round_number}") == "TASK-a"
        claims.release_task(Context(repo), task_id="TASK-a")


def board_store_load(ctx: Context) -> None:
    queries.list_tasks(ctx)


def test_within_the_racy_window_a_change_its_stat_does_not_show_is_found_by_its_bytes(repo: Path) -> None:
    # Where timestamps are coarse (whole seconds on some file systems, a clock tick on others),
    # an edit in place of the same size within one tick leaves the stat key as it was. This
    # kernel's fine timestamps always show it, so the test leaves the key as such a file system
    # would: it gives the store's record of the file the key the edited file has.
    first, _second = two_tasks(repo)
    store = BoardStore(repo, persist=False)
    first.write_bytes(first.read_bytes())  # written just now
    assert "TASK-a" in store.outline(("WORKING",)).tasks  # read within its racy window
    read = store._reads["task"]["TASK-a.md"]
    assert read.racy
    same_size_edit(first, "status: WORKING", "status: BACKLOG")
    info = first.stat()
    read.key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    assert store.outline(("WORKING",)).tasks.keys() == {"TASK-b"}
    assert store.load().tasks["TASK-a"].status == "BACKLOG"


def test_a_store_checks_the_bytes_of_its_own_write_while_its_stat_may_not_show_an_edit(repo: Path) -> None:
    # As above, for the record a store keeps of what it wrote itself (a claim's task file).
    first, _second = two_tasks(repo)
    settle(repo)
    ctx = Context(repo, actor=AGENT)
    assert claim_result(ctx, "w1") == "TASK-a"
    store = board_store(ctx)
    written = store._reads["task"]["TASK-a.md"]
    same_size_edit(first, "assigned_worker: w1", "assigned_worker: w2")
    info = first.stat()
    written.key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    assert store.outline(("WORKING",)).tasks["TASK-a"].assigned_worker == "w2"


def test_files_changed_within_the_racy_window_never_enter_the_cache_file(repo: Path) -> None:
    first, second = two_tasks(repo)
    settle(repo)
    queries.list_tasks(Context(repo))
    cache = repo / CACHE_FILE
    written = cache.read_bytes()
    first.write_text(first.read_text().replace("title: first", "title: FIRST"))
    second.write_text(second.read_text().replace("title: second", "title: SECOND"))
    listed = queries.list_tasks(Context(repo))  # reads both, too recent for their keys to be kept
    assert {t["title"] for t in listed["tasks"]} >= {"FIRST", "SECOND"}
    since = [json.loads(line) for line in cache.read_bytes()[len(written) :].splitlines()]
    assert cache.read_bytes().startswith(written) and all("delta" not in line for line in since)
    # The line that records that full look names them as files a claim must look at again.
    assert set(since[-1]["checked"]["check"]["task"]) >= {"TASK-a.md", "TASK-b.md"}
    settle(repo)
    queries.list_tasks(Context(repo))  # past the window now: appended
    appended = [row[1] for line in cache.read_bytes()[len(written) :].splitlines() for row in json.loads(line).get("delta", ())]
    assert sorted(appended) == ["TASK-a.md", "TASK-b.md"]


def test_a_record_its_writer_offers_is_taken_only_while_the_file_holds_the_bytes_written(repo: Path) -> None:
    first, _second = two_tasks(repo)
    settle(repo)
    server = Context(repo, actor=AGENT)
    for _ in range(3):
        board_store_load(server)
    parsed = board_store(server)._parsed
    assert claim_result(Context(repo, actor=AGENT), "elsewhere") == "TASK-a"  # another store writes, and offers its records
    assert queries.list_tasks(server)["tasks"][0]["assignedWorkerId"] == "elsewhere"
    if board_store(server)._watch is not None:
        assert board_store(server)._parsed == parsed  # the writer's records were taken, not parsed again
    # An edit in place right after the write, which on a coarse file system keeps the stat key
    # the writer recorded: the record is offered again with the key the file has now.
    cache = repo / CACHE_FILE
    offer = next(line for line in reversed(cache.read_bytes().splitlines()) if b'"TASK-a.md"' in line and line.startswith(b'{"delta"'))
    same_size_edit(first, "status: WORKING", "status: BACKLOG")
    row = json.loads(offer)["delta"][0]
    info = first.stat()
    row[2:6] = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    with cache.open("ab") as handle:
        handle.write(json.dumps({"delta": [row]}).encode() + b"\n")
    for ctx in (server, Context(repo, actor=AGENT)):
        assert {t["id"]: t["status"] for t in queries.list_tasks(ctx)["tasks"]}["TASK-a"] == "BACKLOG"


def watching_server_and_writer(repo: Path) -> tuple[Context, BoardStore, BoardStore]:
    """A long-lived store that watches the board (skipped where the file system gives no
    watches), and another store whose writes append their records to the cache file (it has
    read it)."""
    settle(repo)
    server = Context(repo, actor=AGENT)
    for _ in range(3):
        board_store_load(server)
    store = board_store(server)
    if store._watch is None:
        pytest.skip("no file watches on this file system: a load takes the stat of every file instead")
    writer = BoardStore(repo)
    writer.load()
    return server, store, writer


def test_a_store_reading_back_its_own_record_keeps_its_write_and_its_next_edit_is_a_fresh_store_s(repo: Path, tmp_path: Path) -> None:
    # A watching store reads back, with the other writers' records, the line of its own write
    # (a claim's heartbeat): it keeps what it holds of that write (the parsed worker file, for
    # the next heartbeat) instead of decoding the record again. The next edit then writes the
    # bytes, and gives the worker, that a store which never saw the file gives.
    two_tasks(repo)
    _server, store, _writer = watching_server_and_writer(repo)
    store.create("worker", Worker("w1", type="worker", created=STAMP, updated=STAMP))
    store.update("worker", "w1", lambda worker: replace(worker, heartbeat="2026-01-21T10:01:00.000Z"))
    written = store._reads["worker"]["w1.md"]
    assert written.parsed is not None
    store._take_tail()  # its own line among those appended since
    assert store._reads["worker"]["w1.md"] is written
    other = tmp_path / "other"
    shutil.copytree(repo, other)

    def beat(worker: Worker) -> Worker:
        return replace(worker, heartbeat="2026-01-21T10:02:00.000Z", last_epic="EPIC-1")

    kept = store.update("worker", "w1", beat)
    plain = BoardStore(other, persist=False).update("worker", "w1", beat)
    assert kept == plain
    relpath = Path(".moss/board/workers/w1.md")
    assert (repo / relpath).read_bytes() == (other / relpath).read_bytes()
    assert store.load().workers["w1"] == BoardStore(repo, persist=False).load().workers["w1"] == plain


def test_a_record_its_writer_appends_after_a_look_took_the_write_s_events_is_taken_by_the_next_load(repo: Path) -> None:
    # A waiter for the board lock looks at the file events meanwhile (`_catch_up`); it may take
    # a write's events before the writer appends its record of the file to the cache file. The
    # load under the lock then has no new event, but still takes that record: it answers what
    # the files hold, without parsing the file again.
    first, _second = two_tasks(repo)
    server, store, writer = watching_server_and_writer(repo)
    data = files.render_task(Task("TASK-a", "EPIC-1", "first", status="WORKING", priority="CRITICAL", assigned_worker="elsewhere", created=STAMP))
    fs.write_atomic(first, data.encode())  # the writer's write ...
    store._catch_up()  # ... whose events a waiter takes ...
    writer._wrote_file("task", "TASK-a", data.encode())  # ... before its record is appended
    parsed = store._parsed
    board = store.outline(("WORKING",))
    assert outline_of(board.tasks["TASK-a"]) == outline_of(BoardStore(repo, persist=False).load().tasks["TASK-a"])  # the files' answer
    assert board.tasks["TASK-a"].assigned_worker == "elsewhere"
    assert store._parsed == parsed  # taken from the writer's record
    with pytest.raises(Conflict) as refused:  # the solo-worker rule sees the new holder
        claim_result(server, "w1")
    assert refused.value.details["workerId"] == "elsewhere"


def test_looks_while_waiting_take_events_once_a_record_comes_and_the_load_sees_every_change(repo: Path) -> None:
    first, second = two_tasks(repo)
    server, store, writer = watching_server_and_writer(repo)
    store._catch_up()  # the cache file as it is now: the mark the next looks compare with
    # A hand edit brings no record: the looks leave its events queued (nothing to settle).
    same_size_edit(first, "title: first", "title: FIRST")
    for _ in range(3):
        store._catch_up()
    assert not store._watch.dirty
    # A moss write appends its record: the next look takes the events, the edit's too, and
    # settles the written file from its record (no parse); the load sees both changes.
    writer.update("task", "TASK-b", lambda task: replace(task, title="SECOND"))
    parsed = store._parsed
    store._catch_up()
    assert store._parsed == parsed
    assert store._watch.dirty.get("task") == {"TASK-a.md"}  # left for the load, which parses it
    board = store.outline(("WORKING",))
    plain = BoardStore(repo, persist=False).load()
    assert {name: outline_of(task) for name, task in board.tasks.items()} == {name: outline_of(plain.tasks[name]) for name in ("TASK-a", "TASK-b")}
    assert (board.tasks["TASK-a"].title, board.tasks["TASK-b"].title) == ("FIRST", "SECOND")


def test_a_waiter_looks_at_most_once_a_pace_and_the_load_under_the_lock_sees_the_writes_it_left(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # While waiting for the lock, a store looks (`_paced_catch_up`) once the cache file changes,
    # then not again for CATCH_UP_SECONDS (here: longer than the test), however many claims
    # land meanwhile; the load under the lock checks what the looks left, and gives the files'
    # answer.
    from moss_files.board import store as store_module

    monkeypatch.setattr(store_module, "CATCH_UP_SECONDS", 3600.0)
    first, second = two_tasks(repo)
    server, store, writer = watching_server_and_writer(repo)
    writer.update("task", "TASK-a", lambda task: replace(task, title="FIRST"))
    # The first change since: a look, which settles it from its record; the waiter is to call
    # again once the pace has run, not before.
    assert store._paced_catch_up() == store_module.CATCH_UP_SECONDS
    assert not store._watch.dirty
    writer.update("task", "TASK-b", lambda task: replace(task, title="SECOND"))
    same_size_edit(first, "status: WORKING", "status: BACKLOG")  # and a hand edit, with no record
    for _ in range(3):
        again = store._paced_catch_up()  # within the pace: no look, and what is left of it
        assert again is not None and 0 < again <= store_module.CATCH_UP_SECONDS
    store._watch.drain()
    assert {name for name in store._watch.dirty.get("task", ()) if not name.startswith(".")} == {"TASK-a.md", "TASK-b.md"}  # left for the load
    board = store.outline(("WORKING", "BACKLOG"))
    plain = BoardStore(repo, persist=False).load()
    assert {name: outline_of(task) for name, task in board.tasks.items()} == {name: outline_of(plain.tasks[name]) for name in ("TASK-a", "TASK-b")}
    assert (board.tasks["TASK-a"].status, board.tasks["TASK-b"].title) == ("BACKLOG", "SECOND")
    assert claim_result(server, "w1") == "TASK-b"  # the claim weighs the files as they are
    assert "assigned_worker: w1" in second.read_text()


def test_a_watching_store_sees_an_edit_through_a_hard_link_made_after_it_read_the_file(repo: Path, tmp_path: Path) -> None:
    first, _second = two_tasks(repo)
    server = Context(repo, actor=AGENT)
    for _ in range(3):
        board_store_load(server)
    if inotify.local_file_system(str(repo)):
        assert board_store(server)._watch is not None  # only the file's own watch can tell now
    elsewhere = tmp_path / "elsewhere.md"
    os.link(first, elsewhere)  # a link from outside the board, made after the store read the file
    same_size_edit(elsewhere, "status: WORKING", "status: BACKLOG")
    assert claim_result(server, "w1") == "TASK-b"


def test_a_watching_store_sees_a_folder_replaced_and_files_added_to_it(repo: Path) -> None:
    first, _second = two_tasks(repo)
    server = Context(repo, actor=AGENT)
    for _ in range(3):
        board_store_load(server)
    tasks = first.parent
    tasks.rename(tasks.with_name("tasks-old"))
    tasks.mkdir()
    (tasks / "TASK-c.md").write_text(files.render_task(Task("TASK-c", "EPIC-1", "third", status="WORKING", created=STAMP)))
    assert [t["id"] for t in queries.list_tasks(server)["tasks"]] == ["TASK-c"]
    assert claim_result(server, "w1") == "TASK-c"


# In a child process: the collector's switch is the process's, and pytest's own objects must
# not be retired with the board's.
RETIRING = r"""
import gc, json, sys, weakref
from pathlib import Path
from moss_files.board import claims, queries
from moss_files.board.usecase import board_store
from moss_files.foundation.context import Context
ctx = Context(Path(sys.argv[1]), actor="agent")
before = gc.get_freeze_count()
queries.list_tasks(ctx)
first = gc.get_freeze_count()
for _ in range(3):
    queries.list_tasks(ctx)
retired = gc.get_freeze_count()
claimed = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w1")["task"]["id"]
store = weakref.ref(board_store(ctx))
watching = store()._watch is not None
again = gc.get_freeze_count()
del ctx
print(json.dumps({"before": before, "first": first, "retired": retired, "again": again, "after": gc.get_freeze_count(), "claimed": claimed, "watching": watching, "freed": store() is None}))
"""


FIRST_READ = r"""
import gc, json, sys
from pathlib import Path
from moss_files.board import queries
from moss_files.foundation.context import Context

def syncing():
    # While the task folder (the large one) is read: the small folders are read as before.
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_name != "_sync_all":
        frame = frame.f_back
    return frame is not None and frame.f_locals.get("kind") == "task"

during = []
gc.callbacks.append(lambda phase, info: during.append(info["generation"]) if phase == "start" and syncing() else None)
listed = len(queries.list_tasks(Context(Path(sys.argv[1])))["tasks"])
first = len(during)
for _ in range(3):
    queries.list_tasks(Context(Path(sys.argv[1])))  # from the cache file the first one left
print(json.dumps({"listed": listed, "first": first, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_a_large_board_folder_read_from_scratch_is_read_with_the_collector_paused(repo: Path) -> None:
    write_board_of(repo, KEEP_OUT_OF_COLLECTIONS_AT + 20)
    found = json.loads(subprocess.run([sys.executable, "-c", FIRST_READ, str(repo)], capture_output=True, text=True, check=True, timeout=300).stdout)
    assert found["listed"] == KEEP_OUT_OF_COLLECTIONS_AT + 20
    assert found["first"] == 0  # a thousand tasks parsed: several collections, without the pause
    assert found["enabled"] and found["frozen"] == 0  # on again, and nothing retired by a command


def write_board_of(repo: Path, count: int) -> None:
    """An epic and `count` tasks, every other one WORKING (the first of them TASK-00001)."""
    base = repo / ".moss" / "board"
    for folder in ("epics", "tasks"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    (base / "epics" / "EPIC-1.md").write_text(files.render_epic(Epic("EPIC-1", "e", status="ACTIVE", order=1)))
    for n in range(count):
        task = Task(f"TASK-{n:05d}", "EPIC-1", f"task {n}", status="WORKING" if n % 2 else "DONE", order=n, created=STAMP)
        (base / "tasks" / f"{task.id}.md").write_text(files.render_task(task))


@pytest.mark.parametrize("count", [KEEP_OUT_OF_COLLECTIONS_AT + 20, 30])
def test_a_watching_store_retires_a_large_board_from_the_collector_once_and_still_frees_it(repo: Path, count: int) -> None:
    write_board_of(repo, count)
    found = json.loads(subprocess.run([sys.executable, "-c", RETIRING, str(repo)], capture_output=True, text=True, check=True, timeout=300).stdout)
    assert found["claimed"] == "TASK-00001"
    assert found["before"] == found["first"] == 0  # a command's single load retires nothing
    if not found["watching"]:
        assert found["retired"] == 0, "only a watching store retires its board"
    elif count >= KEEP_OUT_OF_COLLECTIONS_AT:
        assert found["retired"] > 3 * count  # every task's objects, and what the process held
        assert found["again"] <= found["retired"]  # once, not at every load (a freed object leaves)
        assert found["after"] < found["again"] - count  # the board's objects, freed with the store
    else:
        assert found["retired"] == 0  # a small board costs a collection little: left as it is
    assert found["freed"], "the store is freed by reference counting when its context is dropped"


@pytest.mark.parametrize("store_kind", ["fresh", "long-lived"])
def test_conflict_markers_and_links_are_reported_never_read_through(repo: Path, store_kind: str) -> None:
    first, second = two_tasks(repo)
    server = Context(repo, actor=AGENT)
    for _ in range(3):
        board_store_load(server)  # both files cached while they were good
    first.write_text(first.read_text().replace("title: first", "<<<<<<< HEAD\ntitle: first\n=======\ntitle: mine\n>>>>>>> theirs"))
    second.unlink()
    second.symlink_to(first.with_name("TASK-x000.md"))  # a DONE task: its bytes must not be read as TASK-b's
    ctx = server if store_kind == "long-lived" else Context(repo, actor=AGENT)
    result = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w1")
    assert result["hasNext"] is False
    codes = {p["path"]: p["code"] for p in result["problems"]}
    assert codes == {".moss/board/tasks/TASK-a.md": "MERGE_CONFLICT", ".moss/board/tasks/TASK-b.md": "SYMLINK_REFUSED"}
    assert next(p for p in result["problems"] if p["code"] == "MERGE_CONFLICT")["line"]
    listed = queries.list_tasks(ctx)
    assert "TASK-a" not in {t["id"] for t in listed["tasks"]} and "TASK-b" not in {t["id"] for t in listed["tasks"]}


def test_claims_append_to_the_cache_file_and_never_rewrite_it(repo: Path) -> None:
    two_tasks(repo)
    settle(repo)
    queries.list_tasks(Context(repo))
    cache = repo / CACHE_FILE
    before = cache.stat()
    header = cache.read_bytes().split(b"\n", 1)[0]
    for n in range(6):
        claimed = claim_result(Context(repo, actor=AGENT), f"w{n}")
        assert claimed is not None
        claims.release_task(Context(repo), task_id=claimed)
    settle(repo)
    queries.list_tasks(Context(repo))  # reads (and appends) what the last claims wrote
    after = cache.stat()
    assert after.st_ino == before.st_ino and after.st_size > before.st_size  # appended to, not replaced
    assert cache.read_bytes().split(b"\n", 1)[0] == header
    deltas = [json.loads(line) for line in cache.read_bytes().split(b"\n")[1:] if line.startswith(b'{"delta"')]
    assert deltas and all(row[0] in ("task", "worker") for line in deltas for row in line["delta"])


# --------------------------------------------------------------------------- the kept claim queue


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def assert_queue_plans_as_the_sort(queue: rules.ClaimQueue, board: Board, workers: list[str | None], epics: list[str | None]) -> None:
    """The kept queue's order is the sort of this board's tasks, and every claim decision made
    through it is the one the plain sort makes."""
    for worker in workers:
        adjacent = board.workers[worker].last_epic if worker in board.workers else None
        assert list(queue.ordered(board, adjacent) or ()) == sorted(board.tasks.values(), key=rules.claim_order(board, worker, True))
        for wanted in CLAIMS:
            for epic in epics:
                for take_over in (False, True):
                    for adjacent_first in (True, False):

                        def decide(kept: rules.ClaimQueue | None, wanted: tuple[str, ...] = wanted, worker: str | None = worker) -> rules.ClaimPlan:
                            return rules.plan_claim(board, wanted, worker, epic_id=epic, replace_existing=take_over, prefer_adjacent=adjacent_first, queue=kept)

                        assert outcome(lambda: decide(queue)) == outcome(lambda: decide(None)), (wanted, worker, epic, take_over)


def plain_plan(
    board: Board, statuses: tuple[str, ...], worker: str | None, *, epic_id: str | None, replace_existing: bool, prefer_adjacent: bool
) -> rules.ClaimPlan:
    """`rules.plan_claim`'s rule read straight off its docstring, with none of its shortcuts:
    every offered task sorted, held ones included, each candidate's rivals found by a look
    at every task."""
    held = board.active_task_of(worker) if worker is not None else None
    if held is not None:
        return rules.ClaimPlan(already=held)
    mates = board.teammates(worker) if worker else frozenset()

    def alive(name: str | None) -> bool:
        return name is not None and (name not in board.workers or board.workers[name].status not in GONE_WORKER_STATUSES)

    def offered(task: Task) -> bool:
        epic = board.epics.get(task.epic)
        return (
            task.status in statuses
            and epic_id in (None, task.epic)
            and not (epic is not None and epic.status == "ARCHIVED")
            and not (task.needs_human_review and task.status == "REVIEW")
            and not (task.status == "WORKING" and rules.waiting_on(task, board.tasks, board.epics))
        )

    def rival(other: Task, task: Task) -> bool:
        holder = other.assigned_worker
        return (other.epic, other.status) == (task.epic, task.status) and holder not in (None, worker) and holder not in mates and alive(holder)

    ranked = sorted(filter(offered, board.tasks.values()), key=rules.claim_order(board, worker, prefer_adjacent and epic_id is None))
    conflicts: list[Task] = []
    for task in ranked:
        if alive(task.assigned_worker):
            continue
        barred = [other for other in board.tasks.values() if rival(other, task)]
        if not barred:
            return rules.ClaimPlan(task=task, takeover_from=task.assigned_worker)
        conflicts += barred
    if worker is not None and replace_existing:
        takeable = [t for t in ranked if t.assigned_worker not in (None, worker) and t.assigned_worker not in mates and alive(t.assigned_worker)]
        if takeable:
            return rules.ClaimPlan(task=takeable[0], takeover_from=takeable[0].assigned_worker)
    if conflicts and worker is not None:
        first = min(conflicts, key=lambda t: rules.rank_key(t, board.epics))
        raise Conflict("solo-worker rule", code="WORKER_CONFLICT", details={"taskId": first.id})
    return rules.ClaimPlan()


def test_a_claim_plan_is_the_plain_rules_answer_with_many_tasks_held(repo: Path) -> None:
    """`plan_claim` passes over held tasks early, finds the claimer's own and the rivals in
    one pass and reads the kept queue lazily: every decision must be the plain rule's."""
    gen = Generated(repo, seed=53, tasks=160)
    for path in gen.task_paths()[::2]:  # half the board held, by live, gone and unknown workers
        text = re.sub(r"\nassigned_worker: [^\n]*", "", path.read_text())
        path.write_text(text.replace("\ntitle:", f"\nassigned_worker: {gen.rng.choice([*gen.workers, 'ghost'])}\ntitle:", 1))
    queue = rules.ClaimQueue()
    some_expired = 0
    for round_number in range(3):
        board = scan(repo)
        for worker in [*workers_to_ask(gen, board), *gen.workers]:
            for wanted in CLAIMS:
                for epic in (None, gen.epics[0], gen.epics[5]):
                    for take_over in (False, True):
                        for adjacent_first in (True, False):
                            plain = outcome(lambda: plain_plan(board, wanted, worker, epic_id=epic, replace_existing=take_over, prefer_adjacent=adjacent_first))
                            for kept in (None, queue):
                                got = outcome(
                                    lambda kept=kept: rules.plan_claim(
                                        board, wanted, worker, epic_id=epic, replace_existing=take_over, prefer_adjacent=adjacent_first, queue=kept
                                    )
                                )
                                assert got == plain, (round_number, worker, wanted, epic, take_over, adjacent_first, kept is not None)
        lease = timedelta(milliseconds=board.project.settings.stale_worker_timeout_ms)
        # Heartbeats are a minute or two old: deadlines fall at 28 and 29 minutes from NOW.
        for now in (NOW, NOW + lease - timedelta(minutes=2), NOW + lease - timedelta(seconds=90), NOW + lease - timedelta(minutes=1), NOW + timedelta(days=1)):
            # The held tasks whose worker's last heartbeat plus the lease is past, in queue order.
            expired = [
                task
                for task in sorted(board.tasks.values(), key=lambda t: rules.rank_key(t, board.epics))
                if task.assigned_worker
                and task.status in ACTIVE
                and (beat := rules.parse_time(getattr(board.workers.get(task.assigned_worker), "heartbeat", None)))
                if now >= beat + lease
            ]
            assert rules.expired_holds(board, now) == expired
            some_expired += 0 < len(expired) < len([t for t in board.tasks.values() if t.assigned_worker])
        gen.mutate()
    assert some_expired  # leases run out for some held tasks and not others


def test_a_kept_claim_queue_plans_what_the_sort_plans_after_hand_edits_checkouts_and_claims(repo: Path) -> None:
    gen = Generated(repo, seed=41, tasks=160)
    for worker in gen.workers[:4]:  # claims prefer the epic of a worker's last claim
        path = gen.base / "workers" / f"{worker}.md"
        path.write_text(files.render_worker(Worker(worker, type="worker", heartbeat=stamp(1), last_epic=gen.rng.choice(gen.epics))))
    commits = [commit_all(repo, "generated")]
    long_lived = BoardStore(repo)
    server = Context(repo, actor=AGENT, clock=fixed_clock)  # its claims keep a queue of their own
    # One queue per source of boards, and one fed by all of them in turn.
    queues = {name: rules.ClaimQueue() for name in ("long-lived", "fresh", "scan", "mixed")}
    weighed = ("PLANNING", "WORKING", "REVIEW", "AWAITING_APPROVAL")
    for number in range(10):
        full = scan(repo)
        asked_workers = [*workers_to_ask(gen, full), *gen.workers[:4]]
        asked_epics: list[str | None] = [None, gen.epics[0], gen.epics[5]]
        boards = {"long-lived": long_lived.outline(weighed), "fresh": BoardStore(repo).outline(weighed), "scan": full}
        for name, board in boards.items():
            assert_queue_plans_as_the_sort(queues[name], board, asked_workers, asked_epics)
            assert_queue_plans_as_the_sort(queues["mixed"], board, asked_workers, asked_epics)
        # A server's claim (its context's kept queue) gives the task the plain sort of the files gives.
        worker = gen.rng.choice([w for w in gen.workers if w in full.workers and full.workers[w].status not in GONE_WORKER_STATUSES])
        statuses = gen.rng.choice(CLAIMS)
        expected = outcome(lambda: rules.plan_claim(full, statuses, worker))
        try:
            result = claims.claim_next_task(server, statuses=list(statuses), worker_id=worker)
            got = (
                "plan",
                result["task"]["id"] if result["hasNext"] else None,
                result.get("takenOverFrom"),
                (result.get("alreadyAssigned") or {}).get("taskId"),
            )
        except Conflict as err:
            got = ("error", err.code, err.details.get("taskId"))
        assert got == expected, number
        if number % 3 == 2:
            # git checkout of an earlier commit: files come, go and change behind every store's back.
            commits.append(commit_all(repo, f"round {number}"))
            git(repo, "checkout", "-q", "--detach", gen.rng.choice(commits[:-1]))
            git(repo, "clean", "-fdq", ".moss")
            gen.ids = sorted(p.stem for p in (gen.base / "tasks").glob("*.md"))
        else:
            gen.mutate()
            # An epic moved in the queue (its order ranks each of its tasks), edited in place.
            epic_path = gen.base / "epics" / f"{gen.rng.choice(gen.epics)}.md"
            epic_path.write_text(re.sub(r"\norder: \d+", f"\norder: {gen.rng.randrange(0, 9)}", epic_path.read_text()))
    long_lived.close()


# --------------------------------------------------------------------------- one owner, at scale

CLAIMER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims, queries
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError

root, prefix, go, ready, mode = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
ctx = Context(root, actor="agent")
queries.list_tasks(ctx)
queries.list_tasks(ctx)  # a long-lived context: it watches the board's files from now on
ready.joinpath(prefix).touch()
deadline = time.monotonic() + 60
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.0002)
results = []
for n in range(4):
    try:
        # "fresh": a new context per claim, as `moss task claim` (from the cache file's check).
        claimer = ctx if mode == "long-lived" else Context(root, actor="agent")
        results.append(claims.claim_next_task(claimer, statuses=["WORKING"], worker_id=f"{prefix}-{n}"))
    except MossError as err:
        results.append({"error": err.code})
print(json.dumps(results))
"""


@pytest.mark.parametrize("mode", ["long-lived", "fresh"])
def test_processes_claiming_at_once_on_a_cached_and_watched_board_give_each_task_one_owner(repo: Path, tmp_path: Path, mode: str) -> None:
    base = repo / ".moss" / "board"
    for folder in ("epics", "tasks", "workers", "teams"):
        (base / folder).mkdir(parents=True)
    (base / "epics" / "EPIC-1.md").write_text(files.render_epic(Epic("EPIC-1", "E", order=1)))
    prefixes = [f"p{n:02d}" for n in range(10)]
    members = tuple(f"{prefix}-{n}" for prefix in prefixes for n in range(4))
    (base / "teams" / "TEAM-all.md").write_text(files.render_team(Team("TEAM-all", "All", role="worker", max_size=len(members), members=members)))
    free = {f"TASK-f{n:03d}" for n in range(25)}
    for n in range(150):
        task_id = f"TASK-f{n:03d}" if n < 25 else f"TASK-d{n:03d}"
        (base / "tasks" / f"{task_id}.md").write_text(
            files.render_task(Task(task_id, "EPIC-1", f"t{n}", status="WORKING" if n < 25 else "DONE", created=STAMP))
        )
    queries.list_tasks(Context(repo))
    assert (repo / CACHE_FILE).exists()
    go, ready = tmp_path / "go", tmp_path / "ready"
    ready.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(repo), prefix, str(go), str(ready), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for prefix in prefixes
    ]
    wait_for(lambda: len(list(ready.iterdir())) == len(prefixes), timeout=60, message="claimers ready")
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.extend(json.loads(out))
    won = [r["task"]["id"] for r in results if r.get("hasNext")]
    assert sorted(won) == sorted(free)  # every free task claimed, none twice
    assert all(r.get("hasNext") or r == {"hasNext": False} for r in results)
    owners = {t["id"]: t["assignedWorkerId"] for t in queries.list_tasks(Context(repo))["tasks"] if t["assignedWorkerId"]}
    assert set(owners) == free and len(set(owners.values())) == len(free)  # on disk too: one worker per task


# --------------------------------------------------------------------------- durable before it returns


def recorded_fsyncs(monkeypatch: pytest.MonkeyPatch, lock: Path) -> list[tuple[tuple[int, int], bool]]:
    """Record every fsync from now on (the real one runs first): the synced file's identity,
    and whether the board lock was held then (another open file cannot take it)."""
    synced: list[tuple[tuple[int, int], bool]] = []
    real = os.fsync

    def recording(fd: int) -> None:
        real(fd)
        info = os.fstat(fd)
        probe = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
        except BlockingIOError:
            held = True
        finally:
            os.close(probe)  # lets go of the probe's lock, when it took it
        synced.append(((info.st_dev, info.st_ino), held))

    monkeypatch.setattr(os, "fsync", recording)
    return synced


def identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return (info.st_dev, info.st_ino)


def test_a_claim_makes_its_task_durable_under_the_lock_and_every_other_write_before_it_returns(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _second = two_tasks(repo)
    base = repo / ".moss" / "board"
    ctx = Context(repo, actor=AGENT)
    board_store_load(ctx)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w0")  # the worker's file, the log and the locks exist now
    claims.release_task(ctx, task_id="TASK-a")
    lock = fs.prepared_lock_path(repo / ".moss" / "run" / "board")
    synced = recorded_fsyncs(monkeypatch, lock)
    assert claim_result(ctx, "w0") == "TASK-a"
    monkeypatch.undo()
    under_lock = {who for who, held in synced if held}
    after = {who for who, held in synced if not held}
    # The task file (its bytes before the rename) and its folder, before the next claimer reads.
    assert {identity(first), identity(base / "tasks")} <= under_lock
    # The worker's file (its lease runs on: its heartbeat is written once the lock is let go,
    # see the next test) and folder, and the activity line, after the lock; all before the
    # claim returned.
    (log,) = activity_files(repo)
    assert {identity(base / "workers" / "w0.md"), identity(base / "workers"), identity(log)} <= after
    assert not {identity(base / "workers"), identity(log)} & under_lock
    assert "heartbeat:" in (base / "workers" / "w0.md").read_text()


def test_a_claim_writes_its_heartbeat_after_the_lock_while_the_lease_runs_on_and_the_same_files_as_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimer whose lease runs on for half a lease or more (its last heartbeat, 10 minutes
    old, of 30) has its claim's heartbeat written just after the board lock is let go; one
    whose lease is older (20 minutes), under the lock, before the task names it. The worker's
    and the task's files and the activity lines are the same either way."""
    written: dict[int, tuple[bytes, bytes, list[dict[str, Any]]]] = {}
    for age in (10, 20):
        root = tmp_path / f"beat-{age}" / "project"  # one name: the project's id is the folder's
        root.mkdir(parents=True)
        first, _second = two_tasks(root)
        worker = root / ".moss" / "board" / "workers" / "w0.md"
        worker.parent.mkdir()
        worker.write_text(files.render_worker(Worker("w0", type="worker", heartbeat=stamp(age), last_epic="EPIC-0", created=STAMP, updated=STAMP)))
        ctx = Context(root, actor=AGENT, clock=fixed_clock)
        board_store_load(ctx)
        synced = recorded_fsyncs(monkeypatch, fs.prepared_lock_path(root / ".moss" / "run" / "board"))
        assert claim_result(ctx, "w0") == "TASK-a"
        monkeypatch.undo()
        under_lock = {who for who, held in synced if held}
        assert (identity(worker) in under_lock) == (age == 20)
        lines = [json.loads(line) for line in activity_lines(root)]
        written[age] = (first.read_bytes(), worker.read_bytes(), [{**line, "id": None} for line in lines])
    assert written[10] == written[20]
    text = written[10][1].decode()
    assert f"heartbeat: {rules.format_moment_ms(NOW)}\n" in text and "last_epic: EPIC-1\n" in text


def test_writes_under_the_lock_are_made_durable_when_the_operation_raises(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    two_tasks(repo)
    base = repo / ".moss" / "board"
    ctx = Context(repo, actor=AGENT)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w0")
    store = board_store(ctx)
    lock = fs.prepared_lock_path(repo / ".moss" / "run" / "board")
    synced = recorded_fsyncs(monkeypatch, lock)
    with pytest.raises(RuntimeError), store.writing():
        store.update("worker", "w0", lambda worker: replace(worker, heartbeat="2026-01-21T11:00:00.000Z"))
        # Seen at once by every reader (the durability is what waits for the lock).
        assert "2026-01-21T11:00:00.000Z" in (base / "workers" / "w0.md").read_text()
        assert identity(base / "workers") not in {who for who, _held in synced}
        raise RuntimeError("the operation fails after its write")
    monkeypatch.undo()
    assert (identity(base / "workers"), False) in synced
    with store.writing():
        pass  # nothing owed is left over from the failed operation
    assert "2026-01-21T11:00:00.000Z" in (base / "workers" / "w0.md").read_text()


# --------------------------------------------------------------------------- claims from a full check


def moss_round(gen: Generated, number: int) -> None:
    """A round of changes moss's own commands make, each in a process of its own (a fresh
    context): claims, releases, moves and a new task; and one file added by rename, as git
    adds one (its folder's stat changes)."""
    rng = gen.rng
    for _n in range(3):
        worker = rng.choice(gen.workers[:8])
        try:
            claims.claim_next_task(fresh(gen.root), statuses=list(rng.choice(CLAIMS)), worker_id=worker)
        except MossError:
            pass  # a conflict the rules raise: still a real answer
    held = [t for t in scan(gen.root).tasks.values() if t.assigned_worker and t.status in ACTIVE]
    for task in rng.sample(held, min(2, len(held))):
        claims.release_task(Context(gen.root, clock=fixed_clock), task_id=task.id)
    movable = [t for t in scan(gen.root).tasks.values() if t.status == "BACKLOG"]
    if movable:
        claims.set_task_status(Context(gen.root, clock=fixed_clock), task_id=rng.choice(movable).id, status="PLANNING")
    task_id = f"TASK-g{number:03d}"
    temp = gen.base / "tasks" / f".{task_id}.tmp"
    temp.write_text(files.render_task(random_task(rng, task_id, gen.epics, gen.workers, gen.ids)))
    os.replace(temp, gen.base / "tasks" / f"{task_id}.md")
    gen.ids.append(task_id)


def test_a_bounded_outline_and_claim_equal_the_full_scan_after_moss_writes_and_files_added(tmp_path: Path) -> None:
    gen = Generated(tmp_path / "project", seed=29, tasks=160)
    settle(gen.root)
    trusted_rounds = 0
    for number in range(12):
        moss_round(gen, number)
        queries.list_tasks(fresh(gen.root))  # a full look, as any listing: the cache file records it
        full = scan(gen.root)
        for statuses in (("WORKING", "AWAITING_APPROVAL"), ("PLANNING", "WORKING", "REVIEW", "AWAITING_APPROVAL")):
            store = BoardStore(gen.root)
            board = store.outline(statuses, bounded=True)
            trusted_rounds += store.trusting
            assert_same(board, full, statuses, workers=workers_to_ask(gen, full), epics=[None, gen.epics[0]])
        # What a claim would give (no worker: shown, not claimed), through the use case.
        for statuses in CLAIMS:
            expected = outcome(lambda statuses=statuses: rules.plan_claim(full, statuses, None))
            result = claims.claim_next_task(fresh(gen.root), statuses=list(statuses))
            assert ("plan", result["task"]["id"] if result["hasNext"] else None, result.get("takenOverFrom"), None) == expected
    assert trusted_rounds  # the cache file's check was taken, not every file's stat


def bounded_claim(root: Path, worker: str | None = None) -> tuple[str | None, bool]:
    """A claim in a fresh context (no worker: what it would give); and whether its first look
    was taken from the cache file's full check."""
    ctx = Context(root, actor=AGENT)
    result = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)
    return (result["task"]["id"] if result["hasNext"] else None), board_store(ctx).trusting


def test_a_task_made_ready_by_an_edit_in_place_is_offered_within_the_bound(repo: Path) -> None:
    first, _second = two_tasks(repo)
    same_size_edit(first, "status: WORKING", "status: BACKLOG")
    settle(repo)
    # A claim from the check right after a full look (retried: on a busy machine a second may pass).
    wait_for(lambda: queries.list_tasks(Context(repo)) and bounded_claim(repo) == ("TASK-b", True), timeout=30, message="a claim from the check")
    same_size_edit(first, "status: BACKLOG", "status: WORKING")  # in place: the folder's stat stays
    # Offered within CHECK_TRUSTED_NS of the last full look (then a claim looks at every file).
    wait_for(lambda: bounded_claim(repo)[0] == "TASK-a", timeout=CHECK_TRUSTED_NS / 1e9 + 30, message="the edited task offered")
    assert claims.claim_next_task(Context(repo, actor=AGENT), statuses=["WORKING"], worker_id="w1")["task"]["id"] == "TASK-a"


def test_a_task_made_unready_by_an_edit_in_place_is_never_claimed(repo: Path) -> None:
    first, _second = two_tasks(repo)
    for round_number in range(6):
        settle(repo)
        for _ in range(2):  # full looks: the cache file holds TASK-a as WORKING, settled
            queries.list_tasks(Context(repo))
        same_size_edit(first, "status: WORKING", "status: BACKLOG")
        ctx = Context(repo, actor=AGENT)
        assert claim_result(ctx, f"w{round_number}") == "TASK-b"  # TASK-a's own file is checked
        assert board_store(ctx)._watch is None  # a command's second look starts no file watches
        claims.release_task(Context(repo), task_id="TASK-b")
        same_size_edit(first, "status: BACKLOG", "status: WORKING")


def test_a_file_added_or_removed_by_rename_is_seen_by_the_next_claim(repo: Path) -> None:
    first, second = two_tasks(repo)
    settle(repo)
    queries.list_tasks(Context(repo))
    temp = first.with_name(".TASK-0.tmp")
    temp.write_text(files.render_task(Task("TASK-0", "EPIC-1", "urgent", status="WORKING", priority="CRITICAL", created=STAMP)))
    os.replace(temp, first.with_name("TASK-0.md"))  # as git adds a file
    assert bounded_claim(repo) == ("TASK-0", False)  # the folder's stat changed: every file looked at
    queries.list_tasks(Context(repo))
    first.with_name("TASK-0.md").unlink()
    first.unlink()
    assert bounded_claim(repo)[0] == "TASK-b"


def appended_lines(cache: Path) -> list[dict[str, Any]]:
    """The lines appended to the cache file after its body."""
    data = cache.read_bytes()
    end = data.index(b"\n")
    start = end + 1 + json.loads(data[:end])["body"]
    return [json.loads(line) for line in data[start:].split(b"\n") if line]


def test_a_full_look_is_recorded_and_each_write_records_its_folder(repo: Path) -> None:
    two_tasks(repo)
    settle(repo)
    queries.list_tasks(Context(repo))
    queries.list_tasks(Context(repo))
    cache = repo / CACHE_FILE
    checked = [line["checked"] for line in appended_lines(cache) if "checked" in line]
    tasks_folder = (repo / ".moss" / "board" / "tasks").stat()
    assert checked and checked[-1]["folders"]["task"] == [tasks_folder.st_ino, tasks_folder.st_mtime_ns, tasks_folder.st_ctime_ns]
    assert bounded_claim(repo, "w1")[0] == "TASK-a"
    rows = [row for line in appended_lines(cache) for row in line.get("delta", ())]
    written = next(row for row in rows if row[1] == "TASK-a.md")
    after = (repo / ".moss" / "board" / "tasks").stat()
    assert written[8] == [after.st_ino, after.st_mtime_ns, after.st_ctime_ns]


def test_the_lines_of_full_checks_do_not_grow_the_cache_file_without_bound(repo: Path) -> None:
    two_tasks(repo)
    settle(repo)
    for _ in range(2 * CACHE_REWRITE_AFTER + 5):  # listings of a board nobody changes
        queries.list_tasks(Context(repo))
    lines = appended_lines(repo / CACHE_FILE)
    assert len(lines) <= CACHE_REWRITE_AFTER + 1  # written anew once they grew many
    assert bounded_claim(repo)[0] == "TASK-a"


# --------------------------------------------------------------------------- the front of the queue


def add_free_tasks(gen: Generated, count: int) -> None:
    """Tasks nobody holds in the claimable columns (a board's queue: the generated ones are
    mostly held), some waiting on others, some parked, some in an archived or unknown epic."""
    for _n in range(count):
        task = random_task(gen.rng, f"TASK-q{len(gen.ids):04d}", gen.epics, gen.workers, gen.ids)
        task = replace(task, status=gen.rng.choice(("PLANNING", "WORKING", "WORKING", "REVIEW")), assigned_worker=None)
        gen.write("tasks", task.id, files.render_task(task))
        gen.ids.append(task.id)


def expected_front_ids(full: Board, weighed: tuple[str, ...], left_out: set[str]) -> set[str]:
    """The tasks an outline of `weighed` with a head holds: those of `expected_outline_ids`
    but the free candidates past the front, which come back only as dependencies."""
    chosen = {i for i, t in full.tasks.items() if (t.status in weighed or (t.assigned_worker and t.status in ACTIVE)) and i not in left_out}
    return chosen | {dep for i in chosen for dep in full.tasks[i].depends_on if dep in full.tasks}


OTHER_CLAIMER = r"""
import sys
from pathlib import Path
from moss_files.board import claims
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError
for worker in sys.argv[2:]:
    try:
        claims.claim_next_task(Context(Path(sys.argv[1]), actor="agent"), statuses=["PLANNING", "WORKING", "REVIEW"], worker_id=worker)
    except MossError:
        pass  # a conflict the rules raise: still a real answer
"""


@pytest.mark.slow
def test_a_claim_from_the_front_of_the_queue_decides_as_the_whole_board(repo: Path) -> None:
    """A claim's first look ranks the free candidates and outlines only the first of them
    (`store.Head`): every decision it settles on (a task of that front) is the one the plain
    sort of a full scan gives, and with nothing left out every decision is; after hand edits,
    `git checkout`s and other processes' claims, through the store and through the use case."""
    gen = Generated(repo, seed=57, tasks=120)
    add_free_tasks(gen, 140)
    for n in range(40):  # the head of the WORKING queue waits on a task nobody made: a claim looks past it
        waiting = Task(f"TASK-w{n:03d}", gen.epics[0], f"waits {n}", status="WORKING", priority="CRITICAL", depends_on=("TASK-missing",), created=STAMP)
        gen.write("tasks", waiting.id, files.render_task(waiting))
    for worker in gen.workers[:5]:  # claims prefer the epic of a worker's last claim
        path = gen.base / "workers" / f"{worker}.md"
        path.write_text(files.render_worker(Worker(worker, type="worker", heartbeat=stamp(1), last_epic=gen.rng.choice(gen.epics))))
    commits = [commit_all(repo, "generated")]
    settled_on_front = left_out = 0
    for number in range(8):
        queries.list_tasks(fresh(repo))  # a full look, as any listing: bounded loads may take its check
        full = scan(repo)
        asked_workers = [*workers_to_ask(gen, full), *gen.workers[:5]]
        for wanted in CLAIMS:
            weighed = (*wanted, "AWAITING_APPROVAL")
            for worker in asked_workers:
                for adjacent in (True, False):
                    free = [t for t in full.tasks.values() if t.status in wanted and not (t.assigned_worker and t.status in ACTIVE)]
                    queue = sorted(free, key=rules.claim_order(full, worker, adjacent))
                    for count, bounded in ((1, False), (4, True), (32, False)):
                        store = BoardStore(repo)
                        head = Head(frozenset(wanted), count, lambda board, worker=worker, adjacent=adjacent: rules.claim_rank(board, worker, adjacent))
                        board = store.outline(weighed, bounded=bounded, head=head)
                        front = store.front
                        # The front is the first `count` free candidates in claim order; every other task is as an outline gives it.
                        assert front == ({t.id for t in queue[:count]} if len(queue) > count else None)
                        assert set(board.tasks) == expected_front_ids(full, weighed, {t.id for t in queue[count:]})
                        for task_id, task in board.tasks.items():
                            assert outline_of(task) == outline_of(full.tasks[task_id]), task_id
                        for take_over in (False, True):

                            def decide(on: Board, wanted: tuple[str, ...] = wanted, worker: str | None = worker, take: bool = take_over) -> rules.ClaimPlan:
                                return rules.plan_claim(on, wanted, worker, replace_existing=take, prefer_adjacent=adjacent)

                            got, plain = outcome(lambda: decide(board)), outcome(lambda: decide(full))
                            if front is None:
                                assert got == plain, (wanted, worker, count)
                            elif got[0] == "plan" and got[1] in front:
                                assert got == plain, (wanted, worker, count)
                                settled_on_front += 1
                            left_out += front is not None
        # Claims through the use case, each in a fresh context, give what the plain sort gives.
        for statuses in CLAIMS:
            live = [w for w in gen.workers if w in full.workers and full.workers[w].status not in GONE_WORKER_STATUSES]
            for who in (None, gen.rng.choice(live or [f"newcomer{number}"])):  # shown (nothing written), then claimed
                full = scan(repo)
                expected = outcome(lambda who=who, statuses=statuses: rules.plan_claim(full, statuses, who))
                try:
                    result = claims.claim_next_task(fresh(repo), statuses=list(statuses), worker_id=who)
                    got = (
                        "plan",
                        result["task"]["id"] if result["hasNext"] else None,
                        result.get("takenOverFrom"),
                        (result.get("alreadyAssigned") or {}).get("taskId"),
                    )
                except Conflict as err:
                    got = ("error", err.code, err.details.get("taskId"))
                assert got == expected, (number, statuses, who)
        # Other processes claim, then the files change behind every store's back.
        subprocess.run([sys.executable, "-c", OTHER_CLAIMER, str(repo), *(f"other{number}-{n}" for n in range(3))], check=True, timeout=120)
        if number % 3 == 2:
            commits.append(commit_all(repo, f"round {number}"))
            git(repo, "checkout", "-q", "--detach", gen.rng.choice(commits[:-1]))
            git(repo, "clean", "-fdq", ".moss")
            gen.ids = sorted(p.stem for p in (gen.base / "tasks").glob("*.md"))
        else:
            gen.mutate()
            epic_path = gen.base / "epics" / f"{gen.rng.choice(gen.epics)}.md"
            epic_path.write_text(re.sub(r"\norder: \d+", f"\norder: {gen.rng.randrange(0, 9)}", epic_path.read_text()))
            add_free_tasks(gen, 3)
    assert settled_on_front and left_out  # the front was both taken and left behind


def test_a_load_in_another_thread_leaves_a_claims_trust_in_the_check_to_be_confirmed(repo: Path) -> None:
    """A server's threads share one store: a full load in one thread (a listing) must not make
    a bounded outline in another look as if it had checked every file, or its claim would skip
    confirming the files it rests on and could give a task edited in place since the check."""
    first, _second = two_tasks(repo)
    settle(repo)

    def trusted_outline() -> BoardStore | None:
        queries.list_tasks(Context(repo))  # a full look: the cache file records it
        store = BoardStore(repo)  # as a command's, which has read the cache file just now
        store.outline(("WORKING",), bounded=True)
        return store if store.trusting else None

    store = wait_for(trusted_outline, timeout=30, message="an outline taken from the cache file's check")
    other = threading.Thread(target=store.load)
    other.start()
    other.join()
    same_size_edit(first, "status: WORKING", "status: BACKLOG")
    assert store.trusting  # this thread's outline still rests on the check
    assert not store.confirm("task", {"TASK-a"})  # and the edit is seen when its file is confirmed


def test_a_write_under_the_board_lock_takes_no_lock_of_its_own_and_loses_nothing_to_one_that_does(repo: Path) -> None:
    """Board writes hold the board lock, so a claim does not also make and take its task
    file's own lock (the first write of a task made a new lock file, under the board lock). A
    tool writing the file outside the board lock (`moss set`) takes the file's lock still, and
    the two are kept apart like a hand edit: whichever writes second reads the file again."""
    first, _second = two_tasks(repo)
    ctx = Context(repo, actor=AGENT)
    calls: list[bytes] = []
    read, go = threading.Event(), threading.Event()

    def retitle(snapshot: fs.Snapshot) -> bytes:
        assert snapshot.data is not None
        calls.append(snapshot.data)
        if len(calls) == 1:
            read.set()  # read, and changed in memory: now the claim writes the file
            assert go.wait(10)
        return snapshot.data.replace(b"\ntitle: first\n", b"\ntitle: first, retitled\n", 1)

    outside = threading.Thread(target=lambda: fs.modify(first, retitle))
    outside.start()
    assert read.wait(10)
    assert claim_result(ctx, "w0") == "TASK-a"
    go.set()
    outside.join(10)
    text = first.read_text()
    assert "\ntitle: first, retitled\n" in text and "\nassigned_worker: w0\n" in text
    assert len(calls) == 2 and b"assigned_worker: w0" in calls[1]  # the retitle ran again, on the claimed file
    assert fs.lock_path_for(first).exists()  # the outside writer's
    fs.lock_path_for(first).unlink()
    claims.release_task(ctx, task_id="TASK-a")
    assert claim_result(ctx, "w1") == "TASK-a"
    assert not fs.lock_path_for(first).exists()  # the board's writes made none

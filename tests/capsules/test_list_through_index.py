"""`moss list`, `inventory` and `latest` read through the search index with many capsules: every
answer equals the file scan's, also right after hand edits and with files the index cannot read."""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moss_files.capsules import model as core
from moss_files.capsules import service as ops
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation.config import Config
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as index_service
from moss_files.index import sources, watch
from tests.conftest import BIN
from tests.helpers import wait_for

FULL = "## Objective\nShip login.\n\n## Status\nHalf.\n\n## Decisions\n- JWT\n\n## Next steps\n(none)\n\n## Files\n- a.py\n\n## Risks\n- none yet\n"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 19, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def generate(root: Path, count: int, seed: int) -> ops.Context:
    """A workspace of `count` capsules: several workspaces, equal times (ties), orchestration
    fields, some deleted, some updated later."""
    (root / ".moss").mkdir(parents=True)
    clock = Clock()
    ctx = ops.Context(root, config=Config(), clock=clock, ids=IdSource(clock, seeded_random(seed)), home=root / "home")
    rng = random.Random(seed)
    stored = []
    for index in range(count):
        if rng.random() < 0.7:
            clock.now += timedelta(milliseconds=rng.choice([0, 0, 1, 1000]))
        extra: dict[str, Any] = {}
        if rng.random() < 0.3:
            extra = {"run_id": f"r{index % 3}", "phase": rng.choice(["plan", "build"]), "role": "qa"}
        name = f"{rng.choice(['auth', 'Auth Flow', 'café', 'notes'])} {index}" if rng.random() < 0.85 else None
        result = ops.store(ctx, capsule_text=FULL, workspace=rng.choice(["default", "Team B", "x"]), name=name, allow_thin=True, **extra)
        stored.append(result)
    gone = rng.sample(stored, count // 10)
    for result in gone:
        ops.delete(ctx, id=result["id"])
    for result in rng.sample([r for r in stored if r not in gone], count // 10):
        clock.now += timedelta(seconds=1)
        ops.update(ctx, id=result["id"], capsule_text=FULL + "\nmore")
    return ctx


def same(call: Any, ctx: ops.Context, **kwargs: Any) -> Any:
    files = call(ctx, through_index=False, **kwargs)
    indexed = call(ctx, through_index=True, **kwargs)
    assert indexed == files, kwargs
    return files


QUERIES: list[tuple[Any, dict[str, Any]]] = [
    (ops.list_capsules, {}),
    (ops.list_capsules, {"workspace": "team b", "limit": 7, "offset": 3}),
    (ops.list_capsules, {"include_deleted": True, "limit": 500}),
    (ops.list_capsules, {"workspace": "x", "run_id": "r1", "role": "qa"}),
    (ops.inventory, {}),
    (ops.inventory, {"include_deleted": True, "limit": 50, "offset": 40}),
    (ops.inventory, {"name_prefix": "auth", "phase": "plan"}),
    (ops.inventory, {"workspace": "default", "name_prefix": "caf"}),
    (ops.inventory, {"tag": "nothing"}),
    (ops.latest, {}),
    (ops.latest, {"workspace": "team b", "include_text": True}),
    (ops.latest, {"workspace": "x", "include_deleted": True, "run_id": "r2"}),
    (ops.latest, {"workspace": "nobody"}),
]


@pytest.mark.parametrize("seed", [1, 2])
def test_index_backed_answers_equal_the_file_scan(tmp_path: Path, seed: int) -> None:
    ctx = generate(tmp_path / "project", 400, seed)
    for call, kwargs in QUERIES:
        same(call, ctx, **kwargs)
    assert same(ops.inventory, ctx, include_deleted=True)["pagination"]["total"] == 400
    # The index answered (rather than stepping aside to the files).
    assert ops._through_index(ctx, None, True, (None, None, None), None, 10, 0, None) is not None


def test_a_hand_edit_is_seen_by_the_next_listing(tmp_path: Path) -> None:
    ctx = generate(tmp_path / "project", 350, 3)
    first = same(ops.list_capsules, ctx, limit=5)["items"][2]
    path = next((tmp_path / "project" / ".moss" / "capsules" / "default").glob(f"*{first['name_norm'].split()[-1]}.md"))
    text = path.read_text()
    info = path.stat()
    # Same size and the same mtime: only the bytes differ (a newer time, one digit changed).
    edited = text.replace("updated_at: 2026-01-19T1", "updated_at: 2026-01-29T1", 1)
    assert len(edited) == len(text) and edited != text
    path.write_text(edited)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    top = same(ops.list_capsules, ctx, limit=5)["items"][0]
    assert top["id"] == first["id"]
    answered = ops._through_index(ctx, "default", False, (None, None, None), None, 1, 0, True)
    assert answered is not None and answered[0][0].id == first["id"]
    # A file that no longer parses: both ways report it (the index path steps aside).
    path.write_text("---\nid: [unclosed\n---\n")
    broken = same(ops.list_capsules, ctx)
    assert broken["problems"]
    path.unlink()
    (path.parent / "stray.txt").write_text("not a capsule")
    assert same(ops.inventory, ctx)["problems"]


def test_few_capsules_or_no_index_yet_mean_reading_the_files(tmp_path: Path) -> None:
    ctx = generate(tmp_path / "project", 20, 4)
    assert ops.list_capsules(ctx) == ops.list_capsules(ctx, through_index=False)
    assert not (tmp_path / "project" / ".moss" / "cache").exists()
    many = generate(tmp_path / "many", 320, 5)
    # With no index built yet, reading the files once is cheaper than building one.
    assert ops._through_index(many, None, False, (None, None, None), None, 10, 0, None) is None
    assert not (tmp_path / "many" / ".moss" / "cache").exists()


# --------------------------------------------------------------------------- files as a checkout holds them

CASED = ["Plan", "plan", "PLAN", None]


def write_capsules(root: Path, count: int, seed: int) -> ops.Context:
    """`count` capsule files written directly (as a git checkout would), with what the index
    holds differently from the files: run, phase, role, tags and names that differ only in
    case, names that casefold to something else (ß), times that tie to the millisecond and
    times with and without milliseconds in one second; soft-deleted ones in `deleted/` and
    ones marked deleted by hand in their slot."""
    (root / ".moss").mkdir(parents=True)
    rng = random.Random(seed)
    ids = IdSource(random_bytes=seeded_random(seed))
    base_ms = 1_768_816_800_000
    for index in range(count):
        updated = base_ms + rng.choice([0, 0, 500, 1000]) * (index // 7)
        deleted = updated + 10 if rng.random() < 0.12 else None
        name = rng.choice(["Straße", "strasse", "Auth Flow", "auth", "ΟΔΟΣ", "x"]) + f" {index}" if rng.random() < 0.85 else None
        capsule = core.Capsule(
            id=ids.ulid(),
            workspace=rng.choice(["default", "Team B", "Straße"]),
            name=name,
            text=FULL,
            created_ms=updated - 5,
            updated_ms=updated,
            tags=tuple(rng.sample(["Bug", "bug", "x y", "ß"], rng.randint(0, 2))) or None,
            run_id=rng.choice(["R1", "r1", None]),
            phase=rng.choice(CASED),
            role=rng.choice(["QA", "qa", None]),
            deleted_ms=deleted,
        )
        relpath = core.capsule_relpath(capsule)
        if deleted is not None and name is not None and rng.random() < 0.3:
            relpath = core.capsule_relpath(replace(capsule, deleted_ms=None))  # marked deleted by hand, still in its slot
        path = root / ".moss" / "capsules" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(core.render_capsule(capsule), encoding="utf-8")
    clock = Clock()
    return ops.Context(root, config=Config(), clock=clock, ids=IdSource(clock, seeded_random(seed)), home=root / "home")


def answered(call: Any, ctx: ops.Context, **kwargs: Any) -> Any:
    """The call's answer, checked equal to the file scan's, and taken from the index (the fast
    path did not step aside to the files)."""
    files = call(ctx, through_index=False, **kwargs)
    tag = kwargs.pop("tag", None)
    include_deleted = kwargs.pop("include_deleted", False)
    filters = (kwargs.pop("run_id", None), kwargs.pop("phase", None), kwargs.pop("role", None))
    prefix = kwargs.pop("name_prefix", None)
    limit, offset = kwargs.pop("limit", 20), kwargs.pop("offset", 0)
    ws = kwargs.pop("workspace", None)
    assert not kwargs, kwargs
    ws_norm = core.normalize(ws) if ws else None
    assert ops._through_index(ctx, ws_norm, include_deleted, filters, prefix, limit, offset, True, tag) is not None
    return files


CASE_QUERIES: list[tuple[Any, dict[str, Any]]] = [
    (ops.list_capsules, {"phase": "Plan"}),
    (ops.list_capsules, {"phase": "plan", "include_deleted": True, "limit": 100}),
    (ops.list_capsules, {"workspace": "straße", "role": "QA", "run_id": "r1"}),
    (ops.inventory, {"phase": "PLAN", "role": "qa", "limit": 500}),
    (ops.inventory, {"tag": "Bug", "limit": 500}),
    (ops.inventory, {"tag": "ß", "include_deleted": True}),
    (ops.inventory, {"name_prefix": "straß", "limit": 500}),
    (ops.inventory, {"name_prefix": "STRASSE", "limit": 500}),
    (ops.inventory, {"name_prefix": "οδος", "include_deleted": True, "limit": 500}),
    (ops.inventory, {"name_prefix": "ΟΔΟΣ 1", "limit": 500}),
    (ops.inventory, {"workspace": "Team B", "name_prefix": "a", "offset": 7, "limit": 13}),
    (ops.inventory, {"include_deleted": True, "offset": 33, "limit": 50}),
    (ops.inventory, {"offset": 99999}),
    (ops.latest, {"workspace": "straße", "phase": "plan"}),
    (ops.latest, {"include_deleted": True, "workspace": "team b"}),
]


def test_filters_on_values_the_index_holds_casefolded_give_the_file_scans_answer(tmp_path: Path) -> None:
    ctx = write_capsules(tmp_path / "project", 420, seed=7)
    index_service.index_rebuild(ctx)
    totals = []
    for call, kwargs in CASE_QUERIES:
        same(call, ctx, **kwargs)
        if call is not ops.latest:
            totals.append(answered(call, ctx, **kwargs)["pagination"]["total"])
    # The queries matched something, and case mattered: "Plan" and "plan" are not one phase.
    assert all(totals[:6]) and totals[0] != answered(ops.list_capsules, ctx, phase="plan")["pagination"]["total"]


def test_times_tied_to_the_millisecond_at_a_page_edge_are_ordered_as_the_file_scan_orders_them(tmp_path: Path) -> None:
    ctx = write_capsules(tmp_path / "project", 320, seed=8)
    index_service.index_rebuild(ctx)
    # A copy of a capsule file: one id in two files, tied in the order.
    folder = tmp_path / "project" / ".moss" / "capsules" / "default"
    source = sorted(folder.glob("*.md"))[0]
    (folder / "copy.md").write_bytes(source.read_bytes())
    for offset in range(0, 320, 9):
        same(ops.inventory, ctx, include_deleted=True, offset=offset, limit=9)


def edit_in_place(path: Path, old: str, new: str) -> None:
    """Rewrite `path` with one value changed to another of the same length, and give it back
    its modification time: same size, same mtime, only the bytes differ."""
    text = path.read_text()
    assert len(old) == len(new) and old in text, (old, path)
    info = path.stat()
    path.write_text(text.replace(old, new, 1))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


@contextmanager
def index_watcher(root: Path) -> Iterator[None]:
    """A `moss index watch` process keeping the index of `root` warm, for as long as it runs."""
    process = subprocess.Popen([str(BIN / "moss"), "index", "watch"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        fingerprint = sources.default_registry().fingerprint
        wait_for(lambda: process.poll() is not None or watch.synced(root, fingerprint) is not None, message="the watcher to answer")
        assert process.poll() is None, process.communicate()
        yield
    finally:
        process.kill()
        process.communicate(timeout=20)


def served_by_the_watcher(ctx: ops.Context) -> bool:
    index = index_service.open_index(ctx)
    index.run(lambda view: None)
    return index.last_refresh is not None and index.last_refresh.watched


@pytest.mark.parametrize("warm", [False, True], ids=["walking", "watcher"])
def test_a_hand_edit_made_a_moment_before_the_listing_is_seen_every_time(tmp_path: Path, warm: bool) -> None:
    root = tmp_path / "project"
    ctx = write_capsules(root, 330, seed=9)
    index_service.index_rebuild(ctx)
    with index_watcher(root) if warm else nullcontext():
        assert served_by_the_watcher(ctx) == warm
        hand_edits(root, ctx)
        assert served_by_the_watcher(ctx) == warm


def hand_edits(root: Path, ctx: ops.Context) -> None:
    """Rounds of hand edits, each followed at once by listings that must see it."""
    base = root / ".moss" / "capsules"
    rng = random.Random(9)
    new_ids = IdSource(random_bytes=seeded_random(99))
    for round_ in range(16):
        path = rng.choice(sorted(base.glob("*/*.md")))
        text = path.read_text()
        kind = round_ % 4
        if kind == 0:
            # The newest capsule now: only the year of updated_at changes (size and mtime kept).
            line = next(line for line in text.splitlines() if line.startswith("updated_at: 2026"))
            edit_in_place(path, line, line.replace("2026", f"{2030 + round_}", 1))
            top = same(ops.inventory, ctx, include_deleted=True, limit=5)["items"][0]
            assert f"id: {top['id']}" in text
            answered(ops.inventory, ctx, include_deleted=True, limit=5)
        elif kind == 1:
            # A filtered field changes case: the phase filter must see it.
            line = next((line for line in text.splitlines() if line.startswith("phase: ")), "phase: none")
            if line in text:
                edit_in_place(path, line, "phase: " + line.removeprefix("phase: ").swapcase())
            for phase in ("Plan", "plan", "PLAN", "pLAN", "pLan"):
                answered(ops.inventory, ctx, phase=phase, limit=500)
        elif kind == 2:
            # A new capsule appears, and one goes.
            fresh = core.Capsule(id=new_ids.ulid(), workspace="Team B", name=f"fresh {round_}", text=FULL, created_ms=1, updated_ms=100 - round_)
            (base / core.capsule_relpath(fresh)).write_text(core.render_capsule(fresh))
            assert same(ops.inventory, ctx, workspace="team b", limit=500)["items"][-1]["id"] == fresh.id
            path.unlink()
            answered(ops.inventory, ctx, include_deleted=True, limit=500)
        else:
            # A stray appears beside the capsules and goes again: reported, then gone.
            stray = path.with_name("notes.txt")
            stray.write_text("not a capsule")
            assert same(ops.inventory, ctx)["problems"]
            stray.unlink()
            assert "problems" not in answered(ops.inventory, ctx)


def test_entries_the_index_does_not_hold_as_capsules_send_the_listing_to_the_files(tmp_path: Path) -> None:
    root = tmp_path / "project"
    ctx = write_capsules(root, 310, seed=10)
    index_service.index_rebuild(ctx)
    base = root / ".moss" / "capsules"
    sample = sorted((base / "default").glob("*.md"))[3].read_text()
    cases = [
        (base / "notes.txt", "a file beside the workspace folders"),
        (base / "default" / "sub" / "a.md", sample),
        (base / "default" / "deleted" / "readme.txt", "not a capsule"),
        (base / ".hidden" / "b.md", sample),
        (base / "default" / "big.md", "---\nname: big\n---\n" + "x" * core.MAX_FILE_BYTES),
        (base / "default" / "broken.md", "---\nid: [unclosed\n---\n"),
        (base / "team+b" / "elsewhere.md", sample),  # its frontmatter names another workspace
    ]
    queries = [*QUERIES, (ops.inventory, {"include_deleted": True, "limit": 500}), (ops.list_capsules, {"workspace": "default", "limit": 100})]
    for path, content in cases:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        for call, kwargs in queries:
            same(call, ctx, **kwargs)
        assert same(ops.inventory, ctx, include_deleted=True)["problems"]
        path.unlink()
    # An empty folder in a workspace is a stray too (the file scan reports it); an empty
    # dot-folder beside the workspaces holds nothing.
    assert same(ops.list_capsules, ctx, workspace="default")["problems"][0]["path"] == ".moss/capsules/default/sub"
    (base / "default" / "sub").rmdir()
    for call, kwargs in queries:
        answered(call, ctx, **kwargs) if call is not ops.latest else same(call, ctx, **kwargs)
    (base / "default" / "link.md").symlink_to(sorted((base / "default").glob("*.md"))[0])
    assert same(ops.list_capsules, ctx, workspace="default")["problems"][0]["code"] == "SYMLINK_REFUSED"


def reference_files(base: Path, workspace_dir: str | None, include_deleted: bool) -> tuple[list[str], list[str]]:
    """The listing `CapsuleStore.files` gave before it was rewritten on os.scandir (pathlib,
    three stats per entry): the reference the fast listing must equal."""

    def entries(folder: Path) -> list[Path]:
        return list(folder.iterdir()) if folder.is_dir() else []

    def ignored(path: Path) -> bool:
        return path.name.startswith(".")

    def is_folder(path: Path) -> bool:
        return not path.is_symlink() and path.is_dir()

    def is_capsule_file(path: Path) -> bool:
        return path.name.endswith(".md") and not path.is_symlink() and path.is_file()

    found: list[Path] = []
    strays: list[Path] = []
    if workspace_dir is not None:
        folders = [base / workspace_dir]
    else:
        folders = sorted(e for e in entries(base) if is_folder(e) and not (e.name.startswith(".") and (".tmp-" in e.name or e.name.endswith(".lock"))))
        strays.extend(sorted(e for e in entries(base) if not is_folder(e) and not ignored(e)))
    for folder in folders:
        for entry in sorted(entries(folder)):
            if ignored(entry):
                continue
            if is_folder(entry) and entry.name == "deleted":
                if include_deleted:
                    for inner in sorted(entries(entry)):
                        if not ignored(inner):
                            (found if is_capsule_file(inner) else strays).append(inner)
                continue
            (found if is_capsule_file(entry) else strays).append(entry)
    return [str(p.relative_to(base)) for p in found], [str(p.relative_to(base)) for p in strays]


def test_the_folder_listing_finds_the_files_and_strays_the_pathlib_listing_found(tmp_path: Path) -> None:
    ctx = write_capsules(tmp_path / "project", 40, seed=11)
    base = tmp_path / "project" / ".moss" / "capsules"
    (base / "zz.txt").write_text("stray")
    (base / ".gitkeep").write_text("")
    (base / ".hidden" / "deleted").mkdir(parents=True)
    (base / ".hidden" / "h.md").write_text("x")
    (base / ".hidden" / "deleted" / "g.md").write_text("x")
    (base / ".x.tmp-1-aa").mkdir()
    (base / ".x.tmp-1-aa" / "t.md").write_text("x")
    (base / "default" / "deleted" / "sub").mkdir(parents=True)
    (base / "default" / "deleted" / ".swp").write_text("")
    (base / "default" / "deleted.md").mkdir()
    (base / "default" / "a.txt").write_text("x")
    (base / "default" / "l.md").symlink_to(base / "zz.txt")
    (base / "default" / "deleted" / "l.md").symlink_to(base / "zz.txt")
    (base / "linked").symlink_to(base / "default")
    store = CapsuleStore(ctx.root)
    for workspace in (None, "default", "team b", "straße", "missing"):
        folder = None if workspace is None else core.workspace_dir(workspace)
        for include_deleted in (True, False):
            paths, problems = store.files(workspace, include_deleted=include_deleted)
            expected = reference_files(base, folder, include_deleted)
            assert [str(p.relative_to(base)) for p in paths] == expected[0]
            assert sorted(str(problem.path) for problem in problems) == sorted(str(Path(".moss/capsules") / s) for s in expected[1])
            listing = store.listing(workspace, include_deleted=include_deleted, ordered=False)
            assert sorted(listing.files) == sorted(expected[0]) and sorted(listing.strays) == sorted(expected[1])

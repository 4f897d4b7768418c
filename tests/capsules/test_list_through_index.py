"""`moss list`, `inventory` and `latest` read through the search index with many capsules: every
answer equals the file scan's, also right after hand edits and with files the index cannot read."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moss_files.capsules import service as ops
from moss_files.foundation.config import Config
from moss_files.foundation.ids import IdSource, seeded_random

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

"""Soft delete of insights, as capsules are deleted: stamped, moved to `deleted/`, out of
listings, orientation, search and timelines; a stopped delete finishes; nothing is clobbered."""

from __future__ import annotations

import difflib
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import run_cli
from mcp_support import make_workspace

from moss_files.foundation import document
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, NotFound
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as search
from moss_files.index.database import SearchIndex
from moss_files.index.sources import default_registry
from moss_files.loopflow import service


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    clock = Clock()
    return Context(make_workspace(tmp_path / "ws"), clock=clock, ids=IdSource(clock, seeded_random(9)))


def test_delete_stamps_moves_and_takes_the_insight_out_of_every_listing(ctx: Context) -> None:
    kept = service.remember(ctx, "Keep the lock file out of git.", tags=["git"])["id"]
    gone = service.remember(ctx, "The lock file belongs in git.", tags=["git"])
    live = ctx.root / gone["path"]
    before = live.read_text()
    assert search.scan(ctx, "lock file")["matches"]  # indexed before the delete

    done = service.delete_insight(ctx, gone["id"])
    moved = ctx.root / ".moss" / "insights" / "deleted" / live.name
    assert done == {"deleted": True, "id": gone["id"], "path": f".moss/insights/deleted/{live.name}"}
    assert not live.exists() and moved.is_file()
    after = moved.read_text()
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert sorted(line.split(":")[0] for line in changed) == ["+ deleted_at", "+ updated", "- updated"]
    assert document.parse(after).body == document.parse(before).body

    assert [item["id"] for item in service.list_insights(ctx)["insights"]] == [kept]
    assert [item["id"] for item in service.orient(ctx)["insights"]["items"]] == [kept]
    assert [hit["id"] for hit in search.scan(ctx, "kind:insight lock file")["matches"]] == [kept]
    assert [hit["id"] for hit in search.scan(ctx, "status:deleted")["matches"]] == [gone["id"]]
    around = search.timeline(ctx, kept, before=5, after=5)
    assert gone["id"] not in [item["id"] for item in around["before"] + around["after"]]
    for call in (lambda: service.show_insight(ctx, gone["id"]), lambda: service.delete_insight(ctx, gone["id"])):
        with pytest.raises(NotFound):
            call()


def test_a_delete_stopped_before_its_move_is_finished_by_the_next_one(ctx: Context) -> None:
    made = service.remember(ctx, "Half deleted.")
    path = ctx.root / made["path"]
    text = path.read_text()
    path.write_text(document.edit_frontmatter(text, {"deleted_at": "2026-01-21T10:00:30Z"}, "x"))  # as a stop after the stamp leaves it
    assert service.list_insights(ctx)["insights"] == []
    assert search.scan(ctx, "half")["matches"] == []
    done = service.delete_insight(ctx, made["id"])
    moved = ctx.root / done["path"]
    assert not path.exists() and document.parse(moved.read_text()).meta["deleted_at"] == "2026-01-21T10:00:30Z"


def test_a_file_in_the_way_in_deleted_is_never_replaced(ctx: Context) -> None:
    made = service.remember(ctx, "Deleted once, written again by hand.")
    path = ctx.root / made["path"]
    deleted = ctx.root / ".moss" / "insights" / "deleted"
    deleted.mkdir()
    shutil.copy(path, deleted / path.name)
    before = {p: p.read_bytes() for p in (path, deleted / path.name)}
    with pytest.raises(Conflict) as caught:
        service.delete_insight(ctx, made["id"])
    assert caught.value.code == "ALREADY_EXISTS"
    assert {p: p.read_bytes() for p in before} == before


def test_the_index_of_deleted_insights_matches_a_full_rebuild(ctx: Context, tmp_path: Path) -> None:
    ids = [service.remember(ctx, f"Insight number {n} about locks.")["id"] for n in range(4)]
    assert len(search.scan(ctx, "kind:insight locks")["matches"]) == 4
    for insight_id in ids[:2]:
        service.delete_insight(ctx, insight_id)
    refreshed = search.open_index(ctx).run(lambda view: view.snapshot())
    rebuilt = SearchIndex(ctx.root, default_registry(), cache_dir=tmp_path / "fresh").run(lambda view: view.snapshot())
    assert refreshed == rebuilt


def test_moss_insight_delete(ctx: Context) -> None:
    made = service.remember(ctx, "From the command line.")
    done = run_cli("moss", "insight", "delete", made["id"], "--json", cwd=ctx.root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"].startswith(".moss/insights/deleted/")
    again = run_cli("moss", "insight", "delete", made["id"], "--json", cwd=ctx.root)
    assert again.returncode == 3 and json.loads(again.stderr)["error"]["code"] == "NOT_FOUND"
    listed = run_cli("moss", "insight", "list", "--json", cwd=ctx.root)
    assert json.loads(listed.stdout)["insights"] == []

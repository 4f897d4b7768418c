"""Capsule operations over real files in a temporary workspace (Moss's behaviours, ported)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moss_files.capsules import service as ops
from moss_files.capsules import transfer
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation.config import Config
from moss_files.foundation.errors import MossError
from moss_files.foundation.ids import IdSource, seeded_random

FULL = "## Objective\nShip login.\n\n## Status\nHalf.\n\n## Decisions\n- JWT\n\n## Next steps\n(none)\n\n## Files\n- a.py\n\n## Risks\n- none yet\n"


class Clock:
    """A clock the test moves forward by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 19, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 1) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ws(repo: Path) -> Path:
    (repo / ".moss").mkdir()
    return repo


@pytest.fixture
def ctx(ws: Path, clock: Clock, tmp_path: Path) -> ops.Context:
    return ops.Context(ws, config=Config(), clock=clock, ids=IdSource(clock, seeded_random(7)), home=tmp_path / "home")


def code_of(call: Any, *args: Any, **kwargs: Any) -> tuple[str, int]:
    with pytest.raises(MossError) as caught:
        call(*args, **kwargs)
    return caught.value.code, caught.value.status


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under .moss/ except lock files and the derived caches of `.moss/cache/`
    (per machine, git-ignored, safe to delete), for 'nothing changed' checks."""
    base = root / ".moss"
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts and p.relative_to(base).parts[0] != "cache"
    }


# --------------------------------------------------------------------------- store / fetch / addressing


def test_names_windows_reserves_work_and_get_safe_file_names(ctx: ops.Context, ws: Path) -> None:
    for name in ("con", "NUL", "com1"):
        ops.store(ctx, capsule_text=FULL, workspace="aux", name=name)
        assert ops.fetch(ctx, workspace="aux", name=name)["name"] == name
    names = sorted(p.relative_to(ws / ".moss/capsules").as_posix() for p in (ws / ".moss/capsules").rglob("*.md"))
    assert names == ["%61ux/%63om1.md", "%61ux/%63on.md", "%61ux/%6Eul.md"]
    assert sorted(item["name"] for item in ops.list_capsules(ctx, workspace="aux")["items"]) == ["NUL", "com1", "con"]
    ops.update(ctx, workspace="aux", name="con", title="Console")
    ops.delete(ctx, workspace="aux", name="nul")
    assert code_of(ops.fetch, ctx, workspace="aux", name="nul")[0] == "NOT_FOUND"


def test_a_capsule_file_named_before_the_escape_is_still_found(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="con")
    escaped = ws / ".moss/capsules/default/%63on.md"
    escaped.rename(escaped.with_name("con.md"))  # as an older version wrote it
    assert ops.fetch(ctx, name="con")["name"] == "con"
    ops.update(ctx, name="con", title="moved on its next write")
    assert escaped.exists() and not escaped.with_name("con.md").exists()


def test_store_then_fetch_by_name_and_by_id(ctx: ops.Context, ws: Path) -> None:
    stored = ops.store(ctx, capsule_text=FULL, workspace="StartupA", name="Auth", tags=["auth"], source="claude-code")
    assert stored["fetch_key"] == stored["task_link"] == {"moss_capsule": "Auth", "moss_workspace": "StartupA"}
    by_name = ops.fetch(ctx, workspace="  startupa ", name="AUTH")
    by_id = ops.fetch(ctx, id=stored["id"])
    assert by_name == by_id
    assert by_name["capsule_text"] == FULL
    assert (by_name["workspace"], by_name["workspace_norm"], by_name["name"], by_name["name_norm"]) == ("StartupA", "startupa", "Auth", "auth")
    assert by_name["title"] == "Auth"  # title defaults to the name
    assert by_name["capsule_chars"] == len(FULL)
    assert (ws / ".moss/capsules/startupa/auth.md").read_text().endswith(FULL)


def test_fetch_peek_without_text(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    assert "capsule_text" not in ops.fetch(ctx, name="auth", include_text=False)


def test_unnamed_capsules_are_fetched_by_id(ctx: ops.Context) -> None:
    stored = ops.store(ctx, capsule_text=FULL)
    assert stored["fetch_key"] == {"moss_id": stored["id"]}
    assert ops.fetch(ctx, id=stored["id"])["capsule_text"] == FULL


@pytest.mark.parametrize(
    ("kwargs", "code", "status"),
    [
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "name": "auth"}, "AMBIGUOUS_ADDRESSING", 400),
        ({}, "INVALID_REQUEST", 400),
        ({"name": "   "}, "INVALID_REQUEST", 400),
        ({"name": "missing"}, "NOT_FOUND", 404),
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "NOT_FOUND", 404),
        ({"id": "../../etc/passwd"}, "NOT_FOUND", 404),
        ({"name": 5}, "INVALID_REQUEST", 400),
    ],
)
def test_addressing_errors(ctx: ops.Context, kwargs: dict[str, Any], code: str, status: int) -> None:
    assert code_of(ops.fetch, ctx, **kwargs) == (code, status)


def test_whitespace_workspace_means_default(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth", workspace="   ")
    assert ops.fetch(ctx, name="auth")["workspace"] == "default"


@pytest.mark.parametrize(
    ("kwargs", "code", "status"),
    [
        ({"capsule_text": "x" * 12001, "allow_thin": True}, "CAPSULE_TOO_LARGE", 413),
        ({"capsule_text": "## Objective\nx\n"}, "CAPSULE_TOO_THIN", 422),
        ({"capsule_text": ""}, "INVALID_REQUEST", 400),
        ({"capsule_text": FULL, "mode": "upsert"}, "INVALID_REQUEST", 400),
        ({"capsule_text": FULL, "tags": "a,b"}, "INVALID_REQUEST", 400),
        ({"capsule_text": FULL, "name": "a\nb"}, "INVALID_REQUEST", 400),
        ({"capsule_text": FULL + "\0"}, "INVALID_REQUEST", 400),
    ],
)
def test_store_refusals_write_nothing(ctx: ops.Context, ws: Path, kwargs: dict[str, Any], code: str, status: int) -> None:
    assert code_of(ops.store, ctx, **kwargs) == (code, status)
    assert snapshot(ws) == {}


def test_configured_limit_applies(ws: Path, clock: Clock) -> None:
    small = ops.Context(ws, config=Config(capsule_max_chars=50), clock=clock)
    assert code_of(ops.store, small, capsule_text=FULL) == ("CAPSULE_TOO_LARGE", 413)


def test_allow_thin(ctx: ops.Context) -> None:
    stored = ops.store(ctx, capsule_text="just a note", name="note", allow_thin=True)
    assert ops.fetch(ctx, id=stored["id"])["capsule_text"] == "just a note"


def test_name_collision_mode_error(ctx: ops.Context, ws: Path) -> None:
    first = ops.store(ctx, capsule_text=FULL, name="auth")
    before = snapshot(ws)
    with pytest.raises(MossError) as caught:
        ops.store(ctx, capsule_text=FULL.replace("Half", "Done"), name=" AUTH ")
    assert (caught.value.code, caught.value.status, caught.value.exit_code) == ("NAME_ALREADY_EXISTS", 409, 5)
    assert caught.value.details["id"] == first["id"]
    assert snapshot(ws) == before


def test_mode_replace_keeps_id_and_hand_written_keys(ctx: ops.Context, ws: Path, clock: Clock) -> None:
    first = ops.store(ctx, capsule_text=FULL, name="auth", tags=["a"], source="codex")
    path = ws / ".moss/capsules/default/auth.md"
    path.write_text(path.read_text().replace("name: auth\n", "name: auth\nowner: me  # hand-written\n"))
    clock.tick()
    second = ops.store(ctx, capsule_text=FULL.replace("Half", "Done"), name="Auth", mode="replace", title="New")
    assert second["id"] == first["id"]
    fetched = ops.fetch(ctx, name="auth")
    assert "Done" in fetched["capsule_text"] and fetched["title"] == "New"
    assert "tags" not in fetched and "source" not in fetched  # replace overwrites every editable field
    assert fetched["name"] == "auth"  # identity keeps its first spelling
    assert fetched["updated_at"] > fetched["created_at"]
    assert "owner: me  # hand-written\n" in path.read_text()


def test_mode_replace_creates_when_nothing_to_replace(ctx: ops.Context) -> None:
    stored = ops.store(ctx, capsule_text=FULL, name="auth", mode="replace")
    assert ops.fetch(ctx, name="auth")["id"] == stored["id"]


def test_replace_never_revives_a_deleted_capsule(ctx: ops.Context) -> None:
    old = ops.store(ctx, capsule_text=FULL, name="auth")
    ops.delete(ctx, name="auth")
    new = ops.store(ctx, capsule_text=FULL, name="auth", mode="replace")
    assert new["id"] != old["id"]
    assert ops.fetch(ctx, id=old["id"], include_deleted=True)["deleted_at"] is not None


# --------------------------------------------------------------------------- delete / purge


def test_soft_delete_frees_the_name_and_hides_the_capsule(ctx: ops.Context, ws: Path, clock: Clock) -> None:
    old = ops.store(ctx, capsule_text=FULL, name="auth")
    clock.tick()
    assert ops.delete(ctx, name="auth") == {"deleted": True, "id": old["id"]}
    assert code_of(ops.fetch, ctx, name="auth") == ("NOT_FOUND", 404)
    assert code_of(ops.fetch, ctx, id=old["id"]) == ("NOT_FOUND", 404)
    assert code_of(ops.delete, ctx, id=old["id"]) == ("NOT_FOUND", 404)
    assert (ws / f".moss/capsules/default/deleted/{old['id']}.md").exists()
    peek = ops.fetch(ctx, name="auth", include_deleted=True)
    assert peek["id"] == old["id"] and peek["deleted_at"] == peek["updated_at"]
    clock.tick()
    new = ops.store(ctx, capsule_text=FULL, name="auth")  # the name slot is free again
    # With an active and a deleted capsule sharing the name, the active one wins.
    assert ops.fetch(ctx, name="auth", include_deleted=True)["id"] == new["id"]
    assert ops.list_capsules(ctx)["pagination"]["total"] == 1
    assert ops.list_capsules(ctx, include_deleted=True)["pagination"]["total"] == 2


def test_purge(ctx: ops.Context, clock: Clock) -> None:
    ops.store(ctx, capsule_text=FULL, name="old", workspace="a")
    ops.store(ctx, capsule_text=FULL, name="other", workspace="b")
    ops.delete(ctx, name="old", workspace="a")
    ops.delete(ctx, name="other", workspace="b")
    clock.tick(3 * 86400)
    ops.store(ctx, capsule_text=FULL, name="recent", workspace="a")
    ops.delete(ctx, name="recent", workspace="a")
    assert code_of(ops.purge, ctx, older_than_days=-1) == ("INVALID_REQUEST", 400)
    preview = ops.purge(ctx, older_than_days=2, dry_run=True)
    assert (preview["purged"], preview["dry_run"], preview["message"]) == (2, True, "Would purge 2 soft-deleted capsules")
    assert sorted(item["name"] for item in preview["items"]) == ["old", "other"]
    assert ops.inventory(ctx, include_deleted=True)["pagination"]["total"] == 3  # a dry run deletes nothing
    other = next(item["id"] for item in preview["items"] if item["name"] == "other")
    assert ops.purge(ctx, older_than_days=2, only_ids=[other])["purged"] == 1  # only what was confirmed
    assert ops.purge(ctx, older_than_days=2)["purged"] == 1
    assert ops.purge(ctx, workspace="b")["purged"] == 0
    result = ops.purge(ctx, workspace="a")
    recent = result["items"][0]
    assert result == {
        "purged": 1,
        "message": "Purged 1 soft-deleted capsule",
        "dry_run": False,
        "items": [{"id": recent["id"], "workspace": "a", "name": "recent", "deleted_at": recent["deleted_at"]}],
    }
    assert ops.inventory(ctx, include_deleted=True)["items"] == []


# --------------------------------------------------------------------------- update / append


def test_update_fields_and_clearing(ctx: ops.Context, clock: Clock) -> None:
    stored = ops.store(ctx, capsule_text=FULL, name="auth", tags=["a"], source="codex", run_id="r1")
    clock.tick()
    result = ops.update(ctx, name="auth", title="T", tags=["x", "y"], source="", run_id="")
    assert result["id"] == stored["id"]
    fetched = ops.fetch(ctx, name="auth")
    assert (fetched["title"], fetched["tags"]) == ("T", ["x", "y"])
    assert "source" not in fetched and "run_id" not in fetched
    assert fetched["updated_at"] == fetched["created_at"] + 1


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({}, "INVALID_REQUEST"),
        ({"capsule_text": "thin"}, "CAPSULE_TOO_THIN"),
        ({"capsule_text": "x" * 20000, "allow_thin": True}, "CAPSULE_TOO_LARGE"),
        ({"name": "nope", "title": "x"}, "NOT_FOUND"),
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "name": "auth", "title": "x"}, "AMBIGUOUS_ADDRESSING"),
    ],
)
def test_update_refusals_write_nothing(ctx: ops.Context, ws: Path, kwargs: dict[str, Any], code: str) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    before = snapshot(ws)
    kwargs = {"name": "auth", **kwargs}
    assert code_of(ops.update, ctx, **kwargs)[0] == code
    assert snapshot(ws) == before


def test_update_text_is_a_small_diff(ctx: ops.Context, ws: Path, clock: Clock) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    path = ws / ".moss/capsules/default/auth.md"
    before = path.read_text().splitlines()
    clock.tick()
    ops.update(ctx, name="auth", capsule_text=FULL.replace("Half.", "Done."))
    after = path.read_text().splitlines()
    assert [line for line in after if line not in before] == ["updated_at: 2026-01-19T10:00:01Z", "Done."]


def test_hand_edit_between_fetch_and_update_is_kept(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    ops.fetch(ctx, name="auth")  # the agent reads...
    path = ws / ".moss/capsules/default/auth.md"
    path.write_text(path.read_text().replace("- JWT\n", "- JWT\n- added by a human\n").replace("name: auth\n", "name: auth\nreviewer: kim\n"))
    ops.update(ctx, name="auth", tags=["reviewed"])  # ...and updates metadata afterwards
    text = path.read_text()
    assert "- added by a human\n" in text and "reviewer: kim\n" in text and "  - reviewed\n" in text


def test_append_replaces_placeholder_then_appends(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    first = ops.append(ctx, section="next STEPS", content="- write tests", name="auth")
    assert first["section_hit"] == "## Next steps" and first["replaced"] is True
    assert first["fetch_key"] == {"moss_capsule": "auth", "moss_workspace": "default"}
    second = ops.append(ctx, section="Next steps", content="- ship", name="auth")
    assert second["replaced"] is False
    assert "## Next steps\n- write tests\n- ship\n\n## Files" in ops.fetch(ctx, name="auth")["capsule_text"]


def test_append_exact_match_only_and_errors(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    ops.store(ctx, capsule_text=json.dumps({"objective": 1}), name="js", allow_thin=True)
    unnamed = ops.store(ctx, capsule_text="## Log\n-\n", allow_thin=True)
    before = snapshot(ws)
    with pytest.raises(MossError) as caught:
        ops.append(ctx, section="next actions", content="x", name="auth")  # a synonym, not the header
    assert caught.value.code == "INVALID_REQUEST" and "Next steps" in caught.value.details["available"]
    assert code_of(ops.append, ctx, section="objective", content="x", name="js")[0] == "INVALID_REQUEST"
    assert code_of(ops.append, ctx, section="", content="x", name="auth")[0] == "INVALID_REQUEST"
    assert code_of(ops.append, ctx, section="Risks", content="  ", name="auth")[0] == "INVALID_REQUEST"
    assert code_of(ops.append, ctx, section="Risks", content="x" * 12000, name="auth") == ("CAPSULE_TOO_LARGE", 413)
    assert snapshot(ws) == before
    assert "fetch_key" not in ops.append(ctx, section="log", content="entry", id=unnamed["id"])


# --------------------------------------------------------------------------- browse


def test_list_pagination_order_and_no_text(ctx: ops.Context, clock: Clock) -> None:
    ids = []
    for index in range(5):
        ids.append(ops.store(ctx, capsule_text=FULL, name=f"c{index}")["id"])
        clock.tick()
    ops.store(ctx, capsule_text=FULL, name="elsewhere", workspace="other")
    page = ops.list_capsules(ctx, limit=2, offset=1)
    assert [item["id"] for item in page["items"]] == [ids[3], ids[2]]
    assert page["pagination"] == {"limit": 2, "offset": 1, "has_more": True, "total": 5}
    assert page["sort"] == "updated_at_desc"
    assert all("capsule_text" not in item and "fetch_key" in item for item in page["items"])
    assert ops.list_capsules(ctx, limit=1000)["pagination"]["limit"] == 100
    assert ops.list_capsules(ctx, offset=5)["items"] == []
    assert code_of(ops.list_capsules, ctx, limit=-1)[0] == "INVALID_REQUEST"
    assert code_of(ops.list_capsules, ctx, offset=-1)[0] == "INVALID_REQUEST"


def test_same_second_updates_keep_a_stable_order(ctx: ops.Context) -> None:
    ids = [ops.store(ctx, capsule_text=FULL, name=f"c{index}")["id"] for index in range(4)]
    assert [i["id"] for i in ops.list_capsules(ctx)["items"]] == sorted(ids, reverse=True)


def test_latest_summary_by_default(ctx: ops.Context, clock: Clock) -> None:
    assert ops.latest(ctx) == {"item": None}
    ops.store(ctx, capsule_text=FULL, name="a", phase="design")
    clock.tick()
    b = ops.store(ctx, capsule_text=FULL, name="b")
    clock.tick()
    ops.update(ctx, name="a", title="touched")
    latest = ops.latest(ctx)["item"]
    assert latest["name"] == "a" and "capsule_text" not in latest and latest["fetch_key"]["moss_capsule"] == "a"
    assert ops.latest(ctx, include_text=True)["item"]["capsule_text"] == FULL
    assert ops.latest(ctx, phase="none")["item"] is None
    clock.tick()
    ops.delete(ctx, name="b")
    assert ops.latest(ctx)["item"]["name"] == "a"
    assert ops.latest(ctx, include_deleted=True)["item"]["id"] == b["id"]


def test_inventory_filters(ctx: ops.Context, clock: Clock) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth-api", workspace="A", tags=["auth"], run_id="r1", phase="p", role="qa")
    ops.store(ctx, capsule_text=FULL, name="auth_db", workspace="B", tags=["db"], run_id="r1")
    ops.store(ctx, capsule_text=FULL, name="billing", workspace="B")
    ops.store(ctx, capsule_text=FULL, name="100%", workspace="B")
    ops.store(ctx, capsule_text=FULL, workspace="B")

    def names(**filters: Any) -> list[str | None]:
        return sorted((item.get("name") or "") for item in ops.inventory(ctx, **filters)["items"])

    assert len(names()) == 5
    assert names(workspace="b") == ["", "100%", "auth_db", "billing"]
    assert names(tag="auth") == ["auth-api"]
    assert names(name_prefix="AUTH") == ["auth-api", "auth_db"]
    assert names(name_prefix="auth_") == ["auth_db"]  # '_' is literal, not a wildcard
    assert names(name_prefix="%") == []
    assert names(run_id="r1", role="qa") == ["auth-api"]
    assert names(run_id="") == names()  # an empty filter is no filter
    page = ops.inventory(ctx, limit=10_000)
    assert page["pagination"]["limit"] == 500 and all("capsule_text" not in item for item in page["items"])


def test_fetch_many_partial_success(ctx: ops.Context) -> None:
    a = ops.store(ctx, capsule_text=FULL, name="a")
    ops.store(ctx, capsule_text=FULL, name="b", workspace="w")
    refs: list[Any] = [
        {"name": "a"},
        {"workspace": "W", "name": "B"},
        {"name": "missing"},
        {"id": a["id"], "name": "a"},
        {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
        "junk",
    ]
    result = ops.fetch_many(ctx, items=refs, include_text=False)
    assert [item["name"] for item in result["items"]] == ["a", "b"]
    assert all("capsule_text" not in item and "fetch_key" in item for item in result["items"])
    assert [(error["ref"], error["code"]) for error in result["errors"]] == [
        ({"name": "missing"}, "NOT_FOUND"),
        ({"id": a["id"], "name": "a"}, "AMBIGUOUS_ADDRESSING"),
        ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "NOT_FOUND"),
        ("junk", "INVALID_REQUEST"),
    ]
    assert code_of(ops.fetch_many, ctx, items=[{"name": "a"}] * 51)[0] == "INVALID_REQUEST"
    assert ops.fetch_many(ctx, items=[{"name": "a"}])["items"][0]["capsule_text"] == FULL


def test_fetch_many_items_carry_task_link_as_store_and_update_return_it(ctx: ops.Context) -> None:
    """Issue 27 item 15: Moss's spec (6.3) says each fetch_many item includes `task_link`."""
    named = ops.store(ctx, capsule_text=FULL, name="a")
    unnamed = ops.store(ctx, capsule_text=FULL)
    for include_text in (True, False):
        items = ops.fetch_many(ctx, items=[{"name": "a"}, {"id": unnamed["id"]}], include_text=include_text)["items"]
        assert [item["task_link"] for item in items] == [named["task_link"], unnamed["task_link"]]
        assert all(item["task_link"] == item["fetch_key"] for item in items)


# --------------------------------------------------------------------------- compose


def test_compose_markdown_and_json(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text="alpha text", name="a", title="Alpha", allow_thin=True)
    ops.store(ctx, capsule_text="beta text", name="b", allow_thin=True)
    unnamed = ops.store(ctx, capsule_text="gamma text", allow_thin=True)
    refs = [{"name": "a"}, {"name": "b"}, {"id": unnamed["id"]}]
    result = ops.compose(ctx, items=refs)
    expected = f"## Alpha\n\nalpha text\n\n---\n\n## b\n\nbeta text\n\n---\n\n## {unnamed['id']}\n\ngamma text"
    assert result == {"bundle_text": expected, "bundle_chars": len(expected), "parts_count": 3}
    parts = json.loads(ops.compose(ctx, items=refs, format="json")["bundle_text"])["parts"]
    assert parts[0] == {"id": parts[0]["id"], "workspace": "default", "name": "a", "display_name": "Alpha", "text": "alpha text", "chars": 10}
    assert parts[2]["name"] == ""


def test_compose_all_or_nothing_and_limits(ctx: ops.Context, ws: Path, clock: Clock) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    with pytest.raises(MossError) as caught:
        ops.compose(ctx, items=[{"name": "a"}, {"name": "missing"}], store_as={"name": "bundle"})
    assert caught.value.code == "NOT_FOUND" and caught.value.details["index"] == 1
    assert code_of(ops.compose, ctx, items=[])[0] == "INVALID_REQUEST"
    assert code_of(ops.compose, ctx, items=[{"name": "a"}] * 51)[0] == "INVALID_REQUEST"
    assert code_of(ops.compose, ctx, items=[{"name": "a"}], format="xml")[0] == "INVALID_REQUEST"
    assert code_of(ops.compose, ctx, items=[{"name": "a"}], format="json", store_as={"name": "x"})[0] == "INVALID_REQUEST"
    small = ops.Context(ws, config=Config(capsule_max_chars=len(FULL) + 5), clock=clock)
    assert code_of(ops.compose, small, items=[{"name": "a"}]) == ("COMPOSE_TOO_LARGE", 413)
    # Measured after filtering: keeping one section fits.
    assert ops.compose(small, items=[{"name": "a"}], sections=["objective"])["bundle_text"] == "## a\n\n## Objective\nShip login."


def test_compose_sections_filter_and_store_as(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    ops.store(ctx, capsule_text="## Objective\n(none)\n", name="empty", allow_thin=True)
    result = ops.compose(ctx, items=[{"name": "a"}, {"name": "empty"}], sections=["risks", "goal", "next actions"], store_as={"name": "digest"})
    assert result["parts_count"] == 1
    assert result["bundle_text"] == "## a\n\n## Risks\n- none yet\n\n## Objective\nShip login."
    stored = ops.fetch(ctx, name="digest")  # stored thin: filtering implies allow_thin
    assert stored["id"] == result["stored"]["id"] and stored["capsule_text"] == result["bundle_text"]
    assert code_of(ops.compose, ctx, items=[{"name": "empty"}], sections=["objective"], store_as={"name": "x"})[0] == "INVALID_REQUEST"
    # Unfiltered bundles are linted before they are stored.
    assert code_of(ops.compose, ctx, items=[{"name": "empty"}], store_as={"name": "x"}) == ("CAPSULE_TOO_THIN", 422)


# --------------------------------------------------------------------------- export / import


def exports(ctx: ops.Context) -> Path:
    folder = transfer.exports_dir(ctx)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_export_header_records_and_permissions(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="a", workspace="W")
    ops.store(ctx, capsule_text=FULL, name="b")
    ops.delete(ctx, name="b")
    target = exports(ctx) / "backup.jsonl"
    result = transfer.export(ctx, path=str(target))
    assert result == {"path": str(target), "count": 1, "exported_at": 1768816800}
    lines = target.read_text().splitlines()
    assert json.loads(lines[0]) == {"_moss_export": True, "schema_version": "1.0", "exported_at": 1768816800}
    assert json.loads(lines[1])["workspace_raw"] == "W"
    assert target.stat().st_mode & 0o777 == 0o600
    assert transfer.export(ctx, path=str(target), include_deleted=True)["count"] == 2  # an earlier export may be replaced


def test_export_default_path_is_safe_from_workspace_names(ctx: ops.Context) -> None:
    ops.store(ctx, capsule_text=FULL, name="a", workspace="../../evil")
    result = transfer.export(ctx, workspace="../../evil")
    path = Path(result["path"])
    assert path.parent == transfer.exports_dir(ctx) and path.name.startswith("%2E%2E%2F%2E%2E%2Fevil-")
    assert transfer.exports_dir(ctx).stat().st_mode & 0o777 == 0o700


def test_export_never_replaces_a_user_file(ctx: ops.Context) -> None:
    target = exports(ctx) / "notes.jsonl"
    target.write_text("my own data\n")
    assert code_of(transfer.export, ctx, path=str(target))[0] == "ALREADY_EXISTS"
    assert target.read_text() == "my own data\n"


def test_round_trip_into_an_empty_workspace_is_identical(ctx: ops.Context, tmp_path: Path, clock: Clock) -> None:
    ops.store(ctx, capsule_text=FULL, name="Auth", workspace="Startup A", tags=["a", "b"], source="codex", run_id="r", phase="p", role="qa")
    ops.store(ctx, capsule_text="héllo wörld 🙂\r\nline two", allow_thin=True, title="unicode")
    clock.tick()
    ops.store(ctx, capsule_text=FULL, name="gone")
    ops.delete(ctx, name="gone")
    first = exports(ctx) / "first.jsonl"
    transfer.export(ctx, path=str(first), include_deleted=True)

    other_root = tmp_path / "other"
    (other_root / ".moss").mkdir(parents=True)
    other = ops.Context(other_root, config=Config(), clock=clock, home=ctx.home)
    assert transfer.import_capsules(other, path=str(first)) == {"imported": 3, "skipped": 0, "errors": []}
    second = exports(ctx) / "second.jsonl"
    transfer.export(other, path=str(second), include_deleted=True)
    assert first.read_text() == second.read_text()
    assert ops.fetch(other, workspace="startup a", name="auth") == ops.fetch(ctx, workspace="startup a", name="auth")


def write_export(ctx: ops.Context, name: str, records: list[dict[str, Any]]) -> Path:
    path = exports(ctx) / name
    lines = [json.dumps({"_moss_export": True, "schema_version": "1.0", "exported_at": 1}), *map(json.dumps, records)]
    path.write_text("\n".join(lines) + "\n")
    return path


def record(id: str, name: str | None, text: str = "imported", **extra: Any) -> dict[str, Any]:
    return {"id": id, "workspace_raw": "default", "name_raw": name, "capsule_text": text, "created_at": 100, "updated_at": 200, **extra}


ID1, ID2, ID3 = "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01BX5ZZKBKACTAV9WEVGEMMVRZ", "01CCCCCCCCCCCCCCCCCCCCCCCC"


def test_import_mode_error_rolls_back_on_name_collision(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="auth")
    path = write_export(ctx, "x.jsonl", [record(ID1, "new"), record(ID2, "AUTH")])
    before = snapshot(ws)
    result = transfer.import_capsules(ctx, path=str(path))
    assert result["imported"] == 0 and [(e["line"], e["code"], e["name"]) for e in result["errors"]] == [(3, "NAME_COLLISION", "AUTH")]
    assert snapshot(ws) == before


def test_import_bad_line_rolls_back_everything(ctx: ops.Context, ws: Path) -> None:
    path = write_export(ctx, "x.jsonl", [record(ID1, "a")])
    path.write_text(path.read_text() + "{broken\n")
    for mode in ("error", "replace", "rename"):
        result = transfer.import_capsules(ctx, path=str(path), mode=mode)
        assert result["imported"] == 0 and result["errors"][0] == {"line": 3, "code": "PARSE_ERROR", "message": result["errors"][0]["message"]}
    assert snapshot(ws) == {}


def test_import_mode_replace(ctx: ops.Context) -> None:
    auth = ops.store(ctx, capsule_text=FULL, name="auth")
    other = ops.store(ctx, capsule_text=FULL, name="other")
    path = write_export(ctx, "x.jsonl", [record(auth["id"], "auth", "by id"), record(ID3, "other", "by name"), record(ID1, "fresh")])
    assert transfer.import_capsules(ctx, path=str(path), mode="replace")["imported"] == 3
    assert ops.fetch(ctx, name="auth")["capsule_text"] == "by id"
    replaced = ops.fetch(ctx, name="other")
    assert (replaced["id"], replaced["capsule_text"]) == (other["id"], "by name")
    assert ops.fetch(ctx, name="fresh")["id"] == ID1


def test_import_replace_that_moves_a_capsule(ctx: ops.Context, ws: Path) -> None:
    auth = ops.store(ctx, capsule_text=FULL, name="auth")
    path = write_export(ctx, "x.jsonl", [record(auth["id"], "renamed", deleted_at=300)])
    assert transfer.import_capsules(ctx, path=str(path), mode="replace")["imported"] == 1
    assert not (ws / ".moss/capsules/default/auth.md").exists()
    assert ops.fetch(ctx, id=auth["id"], include_deleted=True)["name"] == "renamed"


def test_import_mode_replace_errors_on_ambiguous_collision(ctx: ops.Context, ws: Path) -> None:
    a = ops.store(ctx, capsule_text=FULL, name="a")
    ops.store(ctx, capsule_text=FULL, name="b")
    path = write_export(ctx, "x.jsonl", [record(ID1, "fresh"), record(a["id"], "b")])
    before = snapshot(ws)
    result = transfer.import_capsules(ctx, path=str(path), mode="replace")
    assert result["imported"] == 0 and result["errors"][0]["code"] == "AMBIGUOUS_COLLISION"
    assert snapshot(ws) == before


def test_import_mode_rename_auto_suffixes_name(ctx: ops.Context) -> None:
    auth = ops.store(ctx, capsule_text=FULL, name="auth")
    path = write_export(ctx, "x.jsonl", [record(auth["id"], "Auth"), record(ID2, "auth")])
    assert transfer.import_capsules(ctx, path=str(path), mode="rename")["imported"] == 2
    first, second = ops.fetch(ctx, name="auth-1"), ops.fetch(ctx, name="auth-2")
    assert first["id"] != auth["id"] and second["id"] == ID2
    assert ops.fetch(ctx, name="auth")["id"] == auth["id"]


def test_import_limits_and_mode(ctx: ops.Context) -> None:
    big = exports(ctx) / "big.jsonl"
    with open(big, "wb") as handle:
        handle.truncate(transfer.MAX_IMPORT_BYTES + 1)
    with pytest.raises(MossError) as caught:
        transfer.import_capsules(ctx, path=str(big))
    assert (caught.value.code, caught.value.status) == ("FILE_TOO_LARGE", 413)
    assert caught.value.details == {"max_bytes": transfer.MAX_IMPORT_BYTES, "actual_bytes": transfer.MAX_IMPORT_BYTES + 1}
    long_line = write_export(ctx, "long.jsonl", [record(ID1, "a", "x" * (transfer.MAX_IMPORT_LINE_BYTES + 10))])
    assert transfer.import_capsules(ctx, path=str(long_line))["errors"][0]["line"] == 2
    assert code_of(transfer.import_capsules, ctx, path=str(long_line), mode="merge")[0] == "INVALID_REQUEST"
    assert code_of(transfer.import_capsules, ctx, path=str(exports(ctx) / "absent.jsonl"))[0] == "NOT_FOUND"


@pytest.mark.parametrize(
    "bad",
    ["../x.jsonl", "backup.json", "sub/x.jsonl", "/etc/x.jsonl", "", "x.jsonl\0.md"],
)
def test_transfer_paths_outside_the_allowlist_are_refused(ctx: ops.Context, ws: Path, bad: str) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    folder = exports(ctx)
    (folder / "sub").mkdir()
    before = snapshot(ws)
    candidate = bad if bad.startswith("/") or not bad else str(folder / bad)
    assert code_of(transfer.export, ctx, path=candidate)[0] == "INVALID_REQUEST"
    assert code_of(transfer.import_capsules, ctx, path=candidate)[0] in ("INVALID_REQUEST", "NOT_FOUND")
    assert sorted(p.name for p in folder.iterdir()) == ["sub"]
    assert snapshot(ws) == before


def test_symlinked_file_or_folder_is_refused(ctx: ops.Context, tmp_path: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    folder = exports(ctx)
    outside = tmp_path / "outside.jsonl"
    outside.write_text("precious\n")
    (folder / "link.jsonl").symlink_to(outside)
    assert code_of(transfer.export, ctx, path=str(folder / "link.jsonl"))[0] == "INVALID_REQUEST"
    assert code_of(transfer.import_capsules, ctx, path=str(folder / "link.jsonl"))[0] == "INVALID_REQUEST"
    assert outside.read_text() == "precious\n"
    linked_dir = tmp_path / "linked"
    linked_dir.symlink_to(folder)
    allowed = ops.Context(ctx.root, config=Config(allowed_paths=(linked_dir,)), clock=ctx.clock, home=ctx.home)
    assert code_of(transfer.export, allowed, path=str(linked_dir / "x.jsonl"))[0] == "INVALID_REQUEST"


def test_allowed_paths_and_unsafe_escape_hatch(ctx: ops.Context, tmp_path: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    elsewhere = tmp_path / "backups"
    elsewhere.mkdir()
    allowed = ops.Context(ctx.root, config=Config(allowed_paths=(elsewhere,)), clock=ctx.clock, home=ctx.home)
    assert transfer.export(allowed, path=str(elsewhere / "b.jsonl"))["count"] == 1
    unsafe = ops.Context(ctx.root, config=Config(allow_unsafe_paths=True), clock=ctx.clock, home=ctx.home)
    assert transfer.export(unsafe, path=str(tmp_path / "anywhere.jsonl"))["count"] == 1
    # The workspace's own .moss/exports/ is allowed too.
    (ctx.root / ".moss/exports").mkdir()
    assert transfer.export(ctx, path=str(ctx.root / ".moss/exports/w.jsonl"))["count"] == 1


# --------------------------------------------------------------------------- hand-written files


def test_hand_written_capsule_is_valid_and_gains_only_an_id_times_and_version(ctx: ops.Context, ws: Path) -> None:
    folder = ws / ".moss/capsules/default"
    folder.mkdir(parents=True)
    path = folder / "notes.md"
    path.write_text("---\n# written in an editor\nstatus-color: green\n---\n" + FULL)
    fetched = ops.fetch(ctx, name="Notes")
    assert fetched["name"] == "notes" and fetched["capsule_text"] == FULL
    assert ops.fetch(ctx, id=fetched["id"])["name"] == "notes"
    before = path.read_text().splitlines()
    ops.append(ctx, section="Risks", content="- a new one", name="notes")
    after = path.read_text().splitlines()
    added = [line for line in after if line not in before]
    assert added[0] == f"id: {fetched['id']}"
    assert {line.split(":")[0] for line in added[1:]} <= {"created_at", "updated_at", "moss_format", "- a new one"}
    assert "moss_format: 2" in added  # the edit wrote the file at the current format
    assert "# written in an editor" in after and "status-color: green" in after


def test_unreadable_files_are_reported_not_skipped(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="good")
    folder = ws / ".moss/capsules/default"
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\nx")
    (folder / "stray.txt").write_text("?")
    listing = ops.list_capsules(ctx)
    assert [item["name"] for item in listing["items"]] == ["good"]
    problems = sorted(listing["problems"], key=lambda p: p["code"])
    assert [p["code"] for p in problems] == ["FRONTMATTER_SYNTAX", "SCHEMA_ERROR"]
    assert problems[0]["path"] == ".moss/capsules/default/broken.md" and problems[0]["line"]
    assert code_of(ops.fetch, ctx, name="broken")[0] == "FRONTMATTER_SYNTAX"
    with pytest.raises(MossError) as direct:
        ops.fetch(ctx, id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert direct.value.code in ("FRONTMATTER_SYNTAX", "SCHEMA_ERROR")  # the lookup could not rule the broken file out
    assert code_of(transfer.export, ctx, path=str(exports(ctx) / "x.jsonl"))[0] in ("FRONTMATTER_SYNTAX", "SCHEMA_ERROR")


def test_name_in_wrong_file_is_reported(ctx: ops.Context, ws: Path) -> None:
    folder = ws / ".moss/capsules/default"
    folder.mkdir(parents=True)
    (folder / "copy.md").write_text("---\nname: auth\n---\n" + FULL)
    problems = ops.list_capsules(ctx)["problems"]
    assert problems[0]["code"] == "SCHEMA_ERROR" and problems[0]["line"] == 2
    assert problems[0]["path"] == ".moss/capsules/default/copy.md"


def test_hand_marked_deleted_capsule_in_its_slot_frees_the_name(ctx: ops.Context, ws: Path) -> None:
    old = ops.store(ctx, capsule_text=FULL, name="auth")
    path = ws / ".moss/capsules/default/auth.md"
    path.write_text(path.read_text().replace("---\n##", "deleted_at: 2026-01-19T10:00:00Z\n---\n##", 1))
    new = ops.store(ctx, capsule_text=FULL, name="auth")
    assert new["id"] != old["id"]
    assert ops.fetch(ctx, id=old["id"], include_deleted=True)["deleted_at"] == 1768816800


def test_store_file_names_never_escape_the_folder(ctx: ops.Context, ws: Path) -> None:
    for name in ("../../escape", "a/b", "..", ".hidden", "con", "x" * 400, "名前"):
        ops.store(ctx, capsule_text=FULL, name=name, workspace="../ws")
    locks = (ws / ".moss/.locks").resolve()
    for path in (ws / ".moss").rglob("*"):
        inside = path.resolve().is_relative_to((ws / ".moss/capsules").resolve()) or path.resolve().is_relative_to(locks / "capsules")
        assert inside or path.resolve() in (locks, locks / ".gitignore", locks / ".capsules.lock"), path
    assert {item["name"] for item in ops.inventory(ctx)["items"]} == {"../../escape", "a/b", "..", ".hidden", "con", "x" * 400, "名前"}
    assert not any(name.startswith(".") and not name.endswith(".lock") for name in os.listdir(ws / ".moss/capsules/%2E%2E%2Fws"))


def test_store_does_not_leave_temp_files(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    ops.update(ctx, name="a", title="t")
    ops.delete(ctx, name="a")
    assert not [p for p in (ws / ".moss").rglob("*") if ".tmp-" in p.name]


def test_store_creates_only_capsule_files(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    tracked = [p for p in snapshot(ws)]
    assert tracked == ["capsules/default/a.md"]


def test_store_wide_lock_lives_in_the_locks_folder(ctx: ops.Context, ws: Path) -> None:
    ops.store(ctx, capsule_text=FULL, name="a")
    assert (ws / ".moss/.locks/.capsules.lock").exists()
    assert CapsuleStore(ws).base == ws / ".moss/capsules"

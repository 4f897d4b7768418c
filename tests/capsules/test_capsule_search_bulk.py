"""Moss's later capsule operations: search through the index (snippets, filters, paging), and
bulk_update / bulk_delete (filters required, dry runs that write nothing, all or nothing)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files.capsules import bulk, search
from moss_files.capsules import model as core
from moss_files.capsules import service as capsules
from moss_files.foundation import fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest

TEXT = "## Objective\n{objective}\n\n## Current status\nHalf.\n\n## Decisions\n- Cookies\n\n## Next actions\n(none)\n\n## Key locations\n- a.py\n\n## Open questions\n- none\n"


@pytest.fixture
def ws(repo: Path) -> Path:
    (repo / ".moss").mkdir()
    return repo


def store(ctx: Context, name: str, objective: str, **fields: object) -> str:
    return capsules.store(ctx, capsule_text=TEXT.format(objective=objective), name=name, **fields)["id"]  # type: ignore[arg-type]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under .moss/capsules/ with the sha256 of its bytes (our empty lock files aside:
    they are per machine, never content)."""
    base = root / ".moss" / "capsules"
    files = (path for path in sorted(base.rglob("*")) if path.is_file() and not fs.is_temporary(path))
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


# --------------------------------------------------------------------------- snippets (pure)


def test_snippet_escapes_the_text_and_marks_only_the_matches() -> None:
    text = "Keep <script>alert(1)</script> & the JWT secret out of logs; jwt rotation weekly."
    got = core.snippet(text, ["jwt"])
    assert got == "Keep &lt;script&gt;alert(1)&lt;/script&gt; &amp; the <b>JWT</b> secret out of logs; <b>jwt</b> rotation weekly."
    assert core.snippet(text, ["nothing"]).startswith("Keep &lt;script&gt;")


def test_snippet_windows_a_far_match_at_word_boundaries_without_breaking_entities() -> None:
    text = ("filler & words " * 60) + "the needle sits here " + ("<tail> " * 80)
    got = core.snippet(text, ["needle"], max_chars=120)
    assert got.startswith("...") and got.endswith("...") and "<b>needle</b>" in got
    visible = got.removeprefix("...").removesuffix("...").replace("<b>", "").replace("</b>", "")
    import html

    assert len(html.unescape(visible)) <= 120
    assert "&" not in visible.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")  # no half entity
    assert core.snippet("a phrase  split\nacross lines", ["phrase split"]) == "a <b>phrase split</b> across lines"
    assert core.snippet("## Objective\nShip it", []) == "Objective Ship it"


# --------------------------------------------------------------------------- search


def test_search_ranks_filters_pages_and_snips(ws: Path) -> None:
    ctx = Context(ws)
    auth = store(ctx, "auth", "Rotate the JWT signing key <weekly>.", tags=["auth"], run_id="r1", phase="design", role="architect")
    store(ctx, "ui", "Login form posts the JWT to /api.", workspace="Web", tags=["ui"], run_id="r1", phase="qa", role="qa")
    store(ctx, "notes", "Nothing about tokens here.", workspace="web")

    found = search.search(ctx, query="jwt")
    assert found["sort"] == "relevance" and found["pagination"] == {"limit": 20, "offset": 0, "has_more": False, "total": 2}
    first = next(item for item in found["items"] if item["id"] == auth)
    assert "capsule_text" not in first and first["fetch_key"] == {"moss_capsule": "auth", "moss_workspace": "default"}
    assert "<b>JWT</b>" in first["snippet"] and "&lt;weekly&gt;" in first["snippet"]

    assert [i["name"] for i in search.search(ctx, query="jwt", workspace=" WEB ")["items"]] == ["ui"]
    assert [i["name"] for i in search.search(ctx, query="jwt", tag="auth")["items"]] == ["auth"]
    assert [i["name"] for i in search.search(ctx, query="jwt", run_id="r1", phase="qa", role="qa")["items"]] == ["ui"]
    assert search.search(ctx, query="jwt", role="QA")["items"] == []  # orchestration fields compare exactly
    assert search.search(ctx, query="jwt rotate")["pagination"]["total"] == 1  # every word must match
    assert search.search(ctx, query="jwt rotate", match="any")["pagination"]["total"] == 2
    page = search.search(ctx, query="jwt", limit=1, offset=1)
    assert len(page["items"]) == 1 and page["pagination"]["has_more"] is False and page["pagination"]["total"] == 2

    capsules.delete(ctx, name="auth")
    assert [i["name"] for i in search.search(ctx, query="jwt")["items"]] == ["ui"]
    with_deleted = search.search(ctx, query="jwt", include_deleted=True)["items"]
    assert {i["name"] for i in with_deleted} == {"auth", "ui"} and any("deleted_at" in i for i in with_deleted)


def test_search_filters_compare_as_written_though_the_index_folds_case(ws: Path) -> None:
    """The index keeps run, phase, role and workspace casefolded; the filters still compare
    exactly: `Plan` is not `plan`, and the workspaces `Straße` and `strasse` are two."""
    ctx = Context(ws)
    upper = store(ctx, "a", "deploy the thing", phase="Plan", run_id="Run-1", role="Dev")
    lower = store(ctx, "b", "deploy the other", phase="plan", run_id="run-1", role="dev")
    german = store(ctx, "c", "deploy in Köln", workspace="Straße")
    english = store(ctx, "d", "deploy in York", workspace="strasse")

    def ids(**filters: object) -> list[str]:
        found = search.search(ctx, query="deploy", **filters)  # type: ignore[arg-type]
        assert found["pagination"]["total"] == len(found["items"])
        return sorted(item["id"] for item in found["items"])

    assert ids(phase="Plan") == [upper]
    assert ids(phase="plan") == [lower]
    assert ids(run_id="Run-1", role="Dev") == [upper]
    assert ids(run_id="run-1", role="Dev") == []
    assert ids(role="dev") == [lower]
    assert ids(phase="PLAN") == []
    assert ids(workspace="Straße") == [german]
    assert ids(workspace="strasse") == [english]
    assert ids(workspace="STRASSE") == [english]


def test_search_refuses_bad_queries(ws: Path) -> None:
    ctx = Context(ws)
    for query in ("", "   ", "x" * 1001, '"" ***'):
        with pytest.raises(InvalidRequest):
            search.search(ctx, query=query)
    with pytest.raises(InvalidRequest):
        search.search(ctx, query="jwt", match="some")
    # FTS5 syntax in the text is searched for, never run: no syntax error can come back.
    assert search.search(ctx, query='title:"x NEAR( AND')["items"] == []


# --------------------------------------------------------------------------- bulk operations


def test_bulk_update_sets_and_clears_fields_of_matching_live_capsules(ws: Path) -> None:
    ctx = Context(ws)
    one = store(ctx, "one", "First.", run_id="r1", phase="design", tags=["a"])
    two = store(ctx, "two", "Second.", run_id="r1", phase="design", role="qa")
    store(ctx, "other", "Third.", run_id="r2", phase="design")
    store(ctx, "gone", "Fourth.", run_id="r1", phase="design")
    capsules.delete(ctx, name="gone")

    done = bulk.bulk_update(ctx, run_id="r1", set_phase="review", set_role="", set_tags=["x", "y"])
    assert done["updated"] == 2 and done["changed"] == 2 and done["dry_run"] is False
    assert done["message"] == 'Updated 2 capsules matching run_id="r1"; set phase="review", role=null, tags=["x", "y"]'
    assert {item["id"] for item in done["items"]} == {one, two}
    for name in ("one", "two"):
        fetched = capsules.fetch(ctx, name=name)
        assert fetched["phase"] == "review" and "role" not in fetched and fetched["tags"] == ["x", "y"]
    assert capsules.fetch(ctx, name="other")["phase"] == "design"
    assert capsules.fetch(ctx, name="gone", include_deleted=True)["phase"] == "design"  # only live capsules

    again = bulk.bulk_update(ctx, run_id="r1", set_phase="review", set_tags=["x", "y"])
    assert again["updated"] == 2 and again["changed"] == 0  # nothing rewritten
    assert bulk.bulk_update(ctx, name_prefix="ON", set_tags=[])["changed"] == 1
    assert "tags" not in capsules.fetch(ctx, name="one")


def test_bulk_operations_need_a_filter_and_a_change(ws: Path) -> None:
    ctx = Context(ws)
    store(ctx, "one", "First.")
    with pytest.raises(InvalidRequest):
        bulk.bulk_delete(ctx)
    with pytest.raises(InvalidRequest):
        bulk.bulk_delete(ctx, workspace="  ", tag="")
    with pytest.raises(InvalidRequest):
        bulk.bulk_update(ctx, workspace="default")
    with pytest.raises(InvalidRequest):
        bulk.bulk_update(ctx, workspace="default", set_phase="a\nb")
    assert bulk.bulk_delete(ctx, workspace="nowhere") == {"deleted": 0, "message": "No active capsules matched the filters", "dry_run": False, "items": []}


def test_a_dry_run_writes_nothing_byte_for_byte(ws: Path) -> None:
    ctx = Context(ws)
    for index in range(5):
        store(ctx, f"c{index}", f"Capsule {index}.", phase="design")
    before = tree_digest(ws)
    planned = bulk.bulk_update(ctx, phase="design", set_phase="qa", set_tags=["t"], dry_run=True)
    deleting = bulk.bulk_delete(ctx, phase="design", dry_run=True)
    assert tree_digest(ws) == before
    assert planned["updated"] == planned["changed"] == 5 and planned["message"].startswith("Would update 5 capsules")
    assert deleting["deleted"] == 5 and deleting["message"].startswith("Would soft-delete 5 capsules")
    # The dry run and the real run decide the same.
    assert bulk.bulk_delete(ctx, phase="design")["items"] == deleting["items"]


def test_bulk_delete_frees_names_and_is_all_or_nothing(ws: Path) -> None:
    ctx = Context(ws)
    ids = [store(ctx, f"c{index}", f"Capsule {index}.", run_id="r") for index in range(4)]
    # A file standing where the last capsule must go when deleted: its move fails, so the three
    # moves before it are undone and every file is as it was.
    blocker = ws / ".moss" / "capsules" / "default" / "deleted" / f"{ids[3]}.md"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("---\nnote: in the way\n---\n")
    before = tree_digest(ws)
    with pytest.raises(Conflict) as caught:
        bulk.bulk_delete(ctx, run_id="r")
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.details["rolled_back"] == 3
    assert tree_digest(ws) == before
    blocker.unlink()
    done = bulk.bulk_delete(ctx, run_id="r")
    assert done["deleted"] == 4
    assert capsules.list_capsules(ctx)["items"] == []
    store(ctx, "c0", "The name is free again.")


def test_an_unreadable_capsule_stops_a_bulk_operation_before_any_write(ws: Path) -> None:
    ctx = Context(ws)
    store(ctx, "good", "Fine.", phase="p")
    broken = ws / ".moss" / "capsules" / "default" / "broken.md"
    broken.write_text("---\nid: [unclosed\n---\nbody\n")
    before = tree_digest(ws)
    with pytest.raises(InvalidDocument):
        bulk.bulk_update(ctx, phase="p", set_phase="q")
    with pytest.raises(InvalidDocument):
        bulk.bulk_delete(ctx, phase="p")
    assert tree_digest(ws) == before


# --------------------------------------------------------------------------- the CLI


def moss(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", *args, cwd=ws)


def test_search_and_bulk_commands(ws: Path) -> None:
    ctx = Context(ws)
    store(ctx, "auth", "Rotate the JWT key <weekly>.", phase="design", tags=["auth"])
    store(ctx, "ui", "Show the JWT expiry.", phase="design", workspace="web")

    found = moss(ws, "capsule-search", "jwt", "--workspace", "web", "--json")
    assert found.returncode == 0, found.stderr
    assert [item["name"] for item in json.loads(found.stdout)["items"]] == ["ui"]
    human = moss(ws, "capsule-search", "rotate jwt")
    assert "*Rotate* the *JWT* key <weekly>." in human.stdout and "(1 of 1)" in human.stdout
    assert moss(ws, "capsule-search", "   ").returncode == 2

    before = tree_digest(ws)
    dry = moss(ws, "bulk-update", "--phase", "design", "--set-phase", "qa", "--dry-run", "--json")
    assert json.loads(dry.stdout)["updated"] == 2 and tree_digest(ws) == before
    changed = moss(ws, "bulk-update", "--phase", "design", "--set-tags", "x,y")
    assert changed.returncode == 0 and changed.stdout.startswith('Updated 2 capsules matching phase="design"; set tags=["x", "y"]')
    assert moss(ws, "bulk-delete").returncode == 2  # no filter
    deleted = json.loads(moss(ws, "bulk-delete", "--tag", "x", "--workspace", "web", "--json").stdout)
    assert deleted["deleted"] == 1 and deleted["items"][0]["name"] == "ui"

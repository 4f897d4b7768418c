"""The project registry: ours (~/.moss/projects.json) written under its lock, Moe's
(~/.moe/projects.json) read as Moe reads it and never written, `--project NAME|PATH` on every
CLI that takes --root, and MOE_PROJECT_PATH as MOSS_ROOT's alias."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli

from moss_files.foundation import projects, workspace
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, NotFound


def home() -> Path:
    return Path(os.environ["HOME"])


def make_project(parent: Path, name: str) -> Path:
    folder = parent / name
    (folder / ".moss").mkdir(parents=True)
    return folder


def moe_registry(entries: object) -> Path:
    path = home() / ".moe" / "projects.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2))  # the shape Moe's plugin writes (pretty JSON, newest first)
    return path


# --------------------------------------------------------------------------- pure parts


def test_names_are_single_words_and_paths_are_not_names() -> None:
    assert projects.is_name("shop") and projects.is_name("my shop")
    assert not any(projects.is_name(text) for text in ("./shop", "shop/", "/srv/shop", ".", "..", "~", "~/shop", "", "  "))
    assert projects.check_name(" shop ") == "shop"
    for bad in ("a/b", ".", "-x", "tab\there", "~me"):
        with pytest.raises(InvalidRequest):
            projects.check_name(bad)


def test_adding_keeps_unknown_keys_renames_by_folder_and_orders_newest_first() -> None:
    entries = [{"path": "/a", "name": "a", "lastOpenedAt": "2026-01-01T00:00:00Z", "color": "green"}]
    added, created = projects.with_project(entries, "b", "/b", "2026-02-01T00:00:00Z")
    assert created and [e["name"] for e in added] == ["b", "a"]
    renamed, created = projects.with_project(added, "alpha", "/a", "2026-03-01T00:00:00Z")
    assert not created and renamed[0] == {"path": "/a", "name": "alpha", "lastOpenedAt": "2026-03-01T00:00:00Z", "color": "green"}
    with pytest.raises(Conflict) as caught:
        projects.with_project(renamed, "b", "/elsewhere", "2026-04-01T00:00:00Z")
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.details["path"] == "/b"
    kept, removed = projects.without_project(renamed, "/b", "/b")
    assert [e["name"] for e in removed] == ["b"] and [e["name"] for e in kept] == ["alpha"]


def test_our_registry_must_parse_and_the_error_names_the_line() -> None:
    shown = Path("/h/.moss/projects.json")
    with pytest.raises(InvalidDocument) as caught:
        projects.parse_entries('[\n  {"name": "a",\n   "path": }\n]', shown)
    assert caught.value.code == "INVALID_DOCUMENT" and caught.value.line == 3 and caught.value.path == str(shown)
    with pytest.raises(InvalidDocument) as caught:
        projects.parse_entries('[{"name": "a", "path": "/a"}, {"name": "b"}]', shown)
    assert caught.value.code == "SCHEMA_ERROR" and caught.value.details == {"index": 1}
    assert projects.parse_entries("", shown) == []


def test_moes_registry_is_read_as_moe_reads_it_skipping_what_it_cannot_use() -> None:
    shown = Path("/h/.moe/projects.json")
    found, problems = projects.parse_moe('[{"path": "D:/projexts/moes", "name": "moes", "lastOpenedAt": "2026-01-02T03:04:05.123Z"}, {"name": 3}, 7]', shown)
    assert found == [projects.Project("moes", "D:/projexts/moes", "2026-01-02T03:04:05.123Z", "moe")]
    assert [p["index"] for p in problems] == [1, 2] and all(p["code"] == "SCHEMA_ERROR" for p in problems)
    assert projects.parse_moe("{not json", shown)[1][0]["code"] == "INVALID_DOCUMENT"


# --------------------------------------------------------------------------- the files


def test_ours_wins_over_moes_and_moes_first_of_a_name_is_taken(tmp_path: Path) -> None:
    ours, theirs, older = make_project(tmp_path, "ours"), make_project(tmp_path, "theirs"), make_project(tmp_path, "older")
    moe_registry(
        [
            {"path": str(theirs), "name": "app", "lastOpenedAt": "2026-05-01T00:00:00Z"},
            {"path": str(older), "name": "app", "lastOpenedAt": "2026-04-01T00:00:00Z"},  # Moe keys by path: a name may repeat
            {"path": str(theirs), "name": "shared", "lastOpenedAt": "2026-04-01T00:00:00Z"},
        ]
    )
    assert projects.find(home(), "app") == projects.Project("app", str(theirs), "2026-05-01T00:00:00Z", "moe")
    run_cli("moss", "projects", "add", str(ours), "--name", "shared", "--json", cwd=tmp_path)
    assert projects.find(home(), "shared").path == str(ours)  # type: ignore[union-attr]
    assert workspace.find_workspace(explicit="app") == theirs


def test_add_list_remove_through_the_cli_and_moes_file_is_never_written(tmp_path: Path) -> None:
    shop = make_project(tmp_path, "shop")
    moe_file = moe_registry([{"path": "D:/projexts/moes", "name": "moes", "lastOpenedAt": "2026-01-01T00:00:00Z"}, {"oops": True}])
    before = moe_file.read_bytes()
    added = run_cli("moss", "projects", "add", "--json", cwd=shop / ".moss")  # the workspace around the current folder
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["project"]["path"] == str(shop) and json.loads(added.stdout)["created"] is True
    listed = run_cli("moss", "projects", "list", "--json", cwd=tmp_path)
    data = json.loads(listed.stdout)
    assert [(p["name"], p["source"], p["exists"]) for p in data["projects"]] == [("shop", "moss", True), ("moes", "moe", False)]
    assert data["problems"][0]["index"] == 1
    gone = run_cli("moss", "projects", "remove", "moes", "--json", cwd=tmp_path)
    assert gone.returncode == 3 and json.loads(gone.stderr)["error"]["code"] == "PROJECT_NOT_FOUND"
    assert "Moe's registry" in json.loads(gone.stderr)["error"]["hint"]
    removed = run_cli("moss", "projects", "remove", str(shop), "--json", cwd=tmp_path)
    assert removed.returncode == 0 and json.loads(removed.stdout)["removed"][0]["name"] == "shop"
    assert json.loads((home() / ".moss" / "projects.json").read_text()) == []
    assert moe_file.read_bytes() == before


def test_a_taken_name_and_a_broken_registry_leave_the_file_as_it_was(tmp_path: Path) -> None:
    one, two = make_project(tmp_path, "one"), make_project(tmp_path, "two")
    assert run_cli("moss", "projects", "add", str(one), "--name", "app").returncode == 0
    registry = home() / ".moss" / "projects.json"
    before = registry.read_bytes()
    taken = run_cli("moss", "projects", "add", str(two), "--name", "app", "--json")
    assert taken.returncode == 5 and json.loads(taken.stderr)["error"]["code"] == "ALREADY_EXISTS"
    assert registry.read_bytes() == before
    registry.write_text(before.decode()[:-5])  # a hand edit gone wrong
    broken = registry.read_bytes()
    for args in (("projects", "add", str(two)), ("projects", "list"), ("task", "list", "--project", "app")):
        result = run_cli("moss", *args, "--json")
        assert result.returncode == 4, (args, result.stderr)
        error = json.loads(result.stderr)["error"]
        assert error["code"] == "INVALID_DOCUMENT" and error["path"] == str(registry) and error["line"]
    assert registry.read_bytes() == broken


@pytest.mark.slow
def test_processes_adding_at_once_lose_no_project(tmp_path: Path) -> None:
    folders = [make_project(tmp_path, f"p{number}") for number in range(8)]
    children = [
        subprocess.Popen([str(BIN / "moss"), "projects", "add", str(folder), "--name", folder.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for folder in folders
    ]
    for child in children:
        _out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    names = sorted(entry["name"] for entry in json.loads((home() / ".moss" / "projects.json").read_text()))
    assert names == sorted(folder.name for folder in folders)


# --------------------------------------------------------------------------- --project everywhere


def test_project_names_a_registered_project_on_every_cli(tmp_path: Path) -> None:
    shop = make_project(tmp_path, "shop")
    for tool, init in (("cstack", ("init",)), ("needlecast", ("init",))):
        assert run_cli(tool, *init, "--root", str(shop)).returncode == 0
    assert run_cli("moss", "projects", "add", str(shop), "--name", "shop-app").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for tool, args in (("moss", ("list", "--json")), ("cstack", ("status", "--json")), ("needlecast", ("inbox", "--json"))):
        result = run_cli(tool, *args, "--project", "shop-app", cwd=elsewhere)
        assert result.returncode == 0, (tool, result.stderr)
    stats = json.loads(run_cli("cstack", "status", "--json", "--project", str(shop), cwd=elsewhere).stdout)  # a path works too
    assert stats == json.loads(run_cli("cstack", "status", "--json", "--root", "shop-app", cwd=elsewhere).stdout)
    missing = run_cli("moss", "list", "--json", "--project", "nowhere", cwd=elsewhere)
    assert missing.returncode == 3 and json.loads(missing.stderr)["error"]["details"]["known"] == ["shop-app"]


def test_a_word_that_is_a_folder_here_and_a_project_elsewhere_is_refused(tmp_path: Path) -> None:
    registered, here = make_project(tmp_path / "a", "web"), make_project(tmp_path / "b", "web")
    assert run_cli("moss", "projects", "add", str(registered)).returncode == 0
    result = run_cli("moss", "list", "--json", "--project", "web", cwd=here.parent)
    assert result.returncode == 2 and json.loads(result.stderr)["error"]["code"] == "AMBIGUOUS_ADDRESSING"
    assert run_cli("moss", "list", "--json", "--project", "./web", cwd=here.parent).returncode == 2  # as click hands it over: `web`
    assert run_cli("moss", "list", "--json", "--project", str(here), cwd=here.parent).returncode == 0
    assert run_cli("moss", "list", "--json", "--project", "web", cwd=registered.parent).returncode == 0  # the same folder: no doubt


def test_a_registered_folder_that_is_gone_is_reported(tmp_path: Path) -> None:
    gone = make_project(tmp_path, "gone")
    assert run_cli("moss", "projects", "add", str(gone)).returncode == 0
    (gone / ".moss").rmdir()
    gone.rmdir()
    with pytest.raises(NotFound) as caught:
        workspace.find_workspace(explicit="gone")
    assert caught.value.code == "PROJECT_NOT_FOUND" and caught.value.details["path"] == str(gone)


def test_moe_project_path_is_an_alias_of_moss_root(tmp_path: Path) -> None:
    one, two = make_project(tmp_path, "one"), make_project(tmp_path, "two")
    run_cli("moss", "store", "--json", "-w", "w", "-n", "from-one", "--root", str(one), input=CAPSULE)
    outside = tmp_path / "outside"
    outside.mkdir()
    by_moe = run_cli("moss", "list", "--json", "-w", "w", cwd=outside, env={"MOE_PROJECT_PATH": str(one)})
    assert by_moe.returncode == 0, by_moe.stderr
    assert [item["name"] for item in json.loads(by_moe.stdout)["items"]] == ["from-one"]
    both = run_cli("moss", "list", "--json", "-w", "w", cwd=outside, env={"MOE_PROJECT_PATH": str(one), "MOSS_ROOT": str(two)})
    assert json.loads(both.stdout)["items"] == []  # MOSS_ROOT wins
    assert workspace.root_from_env({"MOE_PROJECT_PATH": "/a", "MOSS_ROOT": ""}) == "/a"


CAPSULE = """## Objective
Ship it.
## Current status
Half done.
## Decisions
None yet.
## Next actions
Finish.
## Key locations
src/
## Open questions
None.
"""

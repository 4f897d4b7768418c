"""Sharing insights between workspaces: export a selection to a bundle (secrets and machine
paths removed), preview it, import it selectively; duplicates by content, links remapped, and a
bundle edited and imported again makes no duplicates. Through the use cases, the CLI and MCP."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from mcp import Client
from mcp_support import anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation import fs
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import InvalidDocument, InvalidRequest, NotFound
from moss_files.loopflow import bundles, service, sharing
from moss_files.loopflow.insights import Update
from moss_files.mcp.server import build_server

SECRETS = (
    "sk-ant-api03-Zq8YvT1xW2pL5mN7bC9dF0gH3jK6",
    "ghp_1234567890abcdefghijABCDEFGHIJklmnop",
    "AKIAIOSFODNN7EXAMPLE",
    "hunter2-correct-horse",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZw",
    "MIIEowIBAAKCAQEA7bq",
    "s3cr3t-query-token",
    "pa55w0rd",
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home" / "alice"


@pytest.fixture
def one(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "one")


@pytest.fixture
def two(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "two")


def insights_digest(root: Path) -> dict[str, str]:
    folder = root / ".moss" / "insights"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}


def carry(bundle: str | Path, to: Path, name: str = "shared.json") -> str:
    """Copy a bundle into another workspace's export folder, as a person would."""
    target = to / ".moss" / "exports" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle, target)
    return str(target)


def seed(ctx: Context) -> dict[str, str]:
    lock = service.remember(ctx, "Take the per-file lock before a read-modify-write.", type="architecture", tags=["locks"])["id"]
    retry = service.remember(ctx, "Retry a stale write from the new content, never clobber.", tags=["locks"], links=[lock])["id"]
    merge = service.remember(ctx, "Union merge suits append-only logs.", type="domain", tags=["git"], links=[retry])["id"]
    other = service.remember(ctx, "Deploys wait for Monday.", type="domain", tags=["ops"])["id"]
    return {"lock": lock, "retry": retry, "merge": merge, "other": other}


# --------------------------------------------------------------------------- export


def test_export_takes_a_selection_and_the_insights_it_links_to(one: Path) -> None:
    ctx = Context(one)
    ids = seed(ctx)
    by_tag = sharing.export_bundle(ctx, tags=["git"], path=str(one / ".moss" / "exports" / "git.json"))
    assert (by_tag["insights_exported"], by_tag["linked_insights_added"]) == (3, 2)  # merge -> retry -> lock
    data = json.loads(Path(by_tag["bundle_path"]).read_text())
    assert data["version"] == "1.0" and data["source_repo"]["name"] == "one" and data["metadata"]["total_count"] == 3
    assert {entry["original_id"] for entry in data["insights"]} == {ids["merge"], ids["retry"], ids["lock"]}
    entry = next(e for e in data["insights"] if e["original_id"] == ids["merge"])
    assert entry["links"] == [ids["retry"]] and entry["content_hash"] == bundles.content_hash(entry["content"])

    alone = sharing.export_bundle(ctx, tags=["git"], include_links=False, path=str(one / ".moss" / "exports" / "alone.json"))
    assert alone["insights_exported"] == 1
    assert sharing.export_bundle(ctx, types=["domain"], include_links=False)["insights_exported"] == 2
    assert sharing.export_bundle(ctx, ids=[ids["other"]])["insights_exported"] == 1
    assert sharing.export_bundle(ctx, query='"stale write"', include_links=False)["insights_exported"] == 1
    with pytest.raises(InvalidRequest):
        sharing.export_bundle(ctx, tags=["nothing"])
    with pytest.raises(InvalidRequest):
        sharing.export_bundle(ctx, ids=["INS-404"])


def test_export_removes_planted_secrets_and_absolute_paths(one: Path, home: Path) -> None:
    ctx = Context(one, home=home)
    planted = (
        f"The key {SECRETS[0]} and token {SECRETS[1]} sit in {one}/src/config.py; AWS id {SECRETS[2]}.\n\n"
        f"Login with password: {SECRETS[3]} and `Authorization: Bearer {SECRETS[4]}`.\n\n"
        f"-----BEGIN RSA PRIVATE KEY-----\n{SECRETS[5]}\n-----END RSA PRIVATE KEY-----\n\n"
        f"Fetch https://api.example.com/v1/items?limit=5&token={SECRETS[6]} or https://bot:{SECRETS[7]}@git.example.com/repo.git.\n\n"
        f"Logs in {home}/logs/app.log, /home/bob/notes.txt, C:\\Users\\bob\\dump.txt and /tmp/build-42/out.txt; /usr/bin/env stays."
    )
    made = service.remember(ctx, planted, notes=f"see {one}/docs/notes.md", tags=["secrets"])
    result = sharing.export_bundle(ctx, ids=[made["id"]])
    raw = Path(result["bundle_path"]).read_text()
    for secret in SECRETS:
        assert secret not in raw, secret
    for leaked in (str(one), str(home), "/home/bob", "Users\\\\bob", "/tmp/build-42"):
        assert leaked not in raw, leaked
    [entry] = json.loads(raw)["insights"]
    assert "src/config.py" in entry["content"] and "~/logs/app.log" in entry["content"] and "/usr/bin/env stays" in entry["content"]
    assert "[PRIVATE_KEY]" in entry["content"] and "password: [REDACTED]" in entry["content"] and entry["notes"] == "see docs/notes.md"
    assert result["sanitized"]["api_key"] >= 3 and result["sanitized"]["path"] >= 5 and result["sanitized"]["private_key"] >= 1
    assert Path(result["bundle_path"]).stat().st_mode & 0o777 == 0o600
    # The workspace's own insight is untouched: only what leaves is sanitized.
    assert SECRETS[0] in service.show_insight(ctx, made["id"])["content"]


def test_bundle_paths_are_checked_before_anything_is_written(one: Path, tmp_path: Path) -> None:
    ctx = Context(one)
    seed(ctx)
    exports = one / ".moss" / "exports"
    for bad in (str(tmp_path / "elsewhere.json"), str(exports / "x.txt"), str(exports / ".." / "x.json")):
        with pytest.raises(InvalidRequest):
            sharing.export_bundle(ctx, path=bad)
    exports.mkdir(parents=True, exist_ok=True)
    (exports / "notes.json").write_text('{"mine": true}\n')
    with pytest.raises(Exception) as caught:
        sharing.export_bundle(ctx, path=str(exports / "notes.json"))
    assert getattr(caught.value, "code", "") == "ALREADY_EXISTS" and (exports / "notes.json").read_text() == '{"mine": true}\n'
    (exports / "link.json").symlink_to(exports / "notes.json")
    with pytest.raises(InvalidRequest):
        sharing.preview_bundle(ctx, path=str(exports / "link.json"))
    with pytest.raises(NotFound):
        sharing.preview_bundle(ctx, path=str(exports / "missing.json"))


# --------------------------------------------------------------------------- preview and import


def test_import_remaps_links_and_skips_what_is_already_here(one: Path, two: Path) -> None:
    a, b = Context(one), Context(two)
    ids = seed(a)
    exported = sharing.export_bundle(a, tags=["git"])
    assert sharing.preview_bundle(a, path=exported["bundle_path"])["duplicates"] == 3  # its own insights

    shared = carry(exported["bundle_path"], two)
    seen = sharing.preview_bundle(b, path=shared)
    assert (seen["new_insights"], seen["duplicates"], seen["conflicts"]) == (3, 0, 0) and seen["source_repo"] == "one"
    done = sharing.import_bundle(b, path=shared)
    assert done["imported"] == 3 and set(done["ids"]) == {ids["merge"], ids["retry"], ids["lock"]}
    merged = service.show_insight(b, done["ids"][ids["merge"]])
    assert merged["links"] == [done["ids"][ids["retry"]]]  # links follow the insights to their new ids
    assert merged["status"] == "unprocessed" and merged["source"] == {"original_id": ids["merge"], "repo": "one"}

    before = insights_digest(two)
    again = sharing.import_bundle(b, path=shared)
    assert again["imported"] == 0 and again["skipped"] == 3 and insights_digest(two) == before
    assert {item["reason"] for item in again["skipped_ids"]} == {"duplicate"}


def test_a_bundle_exported_edited_and_imported_again_makes_no_duplicates(one: Path, two: Path) -> None:
    a, b = Context(one), Context(two)
    ids = seed(a)
    shared = carry(sharing.export_bundle(a, tags=["locks"])["bundle_path"], two)
    first = sharing.import_bundle(b, path=shared)
    assert first["imported"] == 2

    data = json.loads(Path(shared).read_text())
    for entry in data["insights"]:
        if entry["original_id"] == ids["retry"]:
            entry["content"] = "Retry a stale write from the new content; give up after five tries."
        else:
            entry["content"] = "  Take the per-file lock   before a read-modify-write.\n"  # white space only
            entry["tags"] = ["locks", "fs"]
    data["insights"].append({"original_id": "INS-NEW-1", "content": "Locks have deadlines.", "type": "technical", "links": [ids["lock"]]})
    Path(shared).write_text(json.dumps(data))

    seen = sharing.preview_bundle(b, path=shared)
    assert (seen["new_insights"], seen["duplicates"], seen["conflicts"]) == (1, 1, 1)
    second = sharing.import_bundle(b, path=shared)
    assert (second["imported"], second["updated"], second["skipped"]) == (1, 0, 2)
    assert len(service.list_insights(b)["insights"]) == 3
    fresh = service.show_insight(b, second["ids"]["INS-NEW-1"])
    assert fresh["links"] == [first["ids"][ids["lock"]]]  # linked to the copy here, not the far id

    third = sharing.import_bundle(b, path=shared, skip_conflicts=False)
    assert (third["imported"], third["updated"]) == (0, 1)
    retry_here = service.show_insight(b, first["ids"][ids["retry"]])
    assert retry_here["content"].startswith("Retry a stale write from the new content; give up") and retry_here["id"] == first["ids"][ids["retry"]]
    assert len(service.list_insights(b)["insights"]) == 3
    fourth = sharing.preview_bundle(b, path=shared)
    assert (fourth["new_insights"], fourth["duplicates"], fourth["conflicts"]) == (0, 3, 0)


def test_selected_ids_and_bundles_that_cannot_be_read(one: Path, two: Path) -> None:
    a, b = Context(one), Context(two)
    ids = seed(a)
    shared = carry(sharing.export_bundle(a, tags=["git"])["bundle_path"], two)
    picked = sharing.import_bundle(b, path=shared, selected_ids=[ids["lock"]])
    assert picked["imported"] == 1 and {item["reason"] for item in picked["skipped_ids"]} == {"not selected"}
    before = insights_digest(two)
    with pytest.raises(InvalidRequest):
        sharing.import_bundle(b, path=shared, selected_ids=["INS-404"])
    data = json.loads(Path(shared).read_text())
    data["insights"][1]["type"] = "gossip"
    broken = carry(shared, two, "broken.json")
    Path(broken).write_text(json.dumps(data))
    with pytest.raises(InvalidDocument) as caught:
        sharing.import_bundle(b, path=broken)
    assert caught.value.code == "SCHEMA_ERROR" and caught.value.details["errors"][0]["index"] == 1
    Path(broken).write_text("{not json")
    with pytest.raises(InvalidDocument) as bad_json:
        sharing.preview_bundle(b, path=broken)
    assert bad_json.value.code == "PARSE_ERROR"
    Path(broken).write_text(json.dumps({**data, "version": "9"}))
    with pytest.raises(InvalidDocument):
        sharing.import_bundle(b, path=broken)
    assert insights_digest(two) == before


def test_an_import_that_fails_midway_removes_what_it_created(one: Path, two: Path) -> None:
    a = Context(one)
    seed(a)
    shared = carry(sharing.export_bundle(a, tags=["git"])["bundle_path"], two)
    # The third new insight's file name is taken when it is written: the first two go again.
    taken: list[str] = []
    minted = iter(["INS-20260101-aaaaaaaa", "INS-20260101-bbbbbbbb", "INS-20260101-cccccccc"])

    def new_id(prefix: str) -> str:
        made = next(minted)
        taken.append(made)
        return made

    class Ids:
        def prefixed(self, prefix: str) -> str:
            return new_id(prefix)

        def ulid(self) -> str:
            raise AssertionError("not used")

    folder = two / ".moss" / "insights"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "INS-20260101-cccccccc.md").write_text("---\nid: INS-20260101-cccccccc\n---\nAlready here.\n")
    before = insights_digest(two)
    with pytest.raises(Exception) as caught:
        sharing.import_bundle(Context(two, ids=Ids()), path=shared)  # type: ignore[arg-type]
    assert getattr(caught.value, "code", "") == "ALREADY_EXISTS" and caught.value.details["rolled_back"] == 2  # type: ignore[attr-defined]
    assert insights_digest(two) == before and not any(fs.is_temporary(p) for p in folder.iterdir() if p.suffix == ".md")


def test_a_loopflow_insights_json_is_read_as_a_bundle(two: Path) -> None:
    b = Context(two)
    export = {
        "schema_version": "0.1.0",
        "exported_at": "2026-01-22T10:43:53.121Z",
        "source": "loopflow-sqlite",
        "insights": [
            {
                "id": "INS-060",
                "content": "MCP servers need a rebuild after changes.",
                "type": "technical",
                "status": "discussed",
                "tags": ["mcp"],
                "created": "2026-01-21T08:00:00Z",
            },
            {
                "id": "INS-071",
                "content": "Chicken-and-egg problem when developing LoopFlow's MCP server.",
                "type": "technical",
                "status": "unprocessed",
                "source": {"task": "ad-hoc", "session": "2026-01-22"},
                "tags": ["loop-flow-core", "gotcha"],
                "links": ["INS-060", "LF-049"],
                "created": "2026-01-22T08:48:53.156Z",
            },
        ],
    }
    path = two / ".moss" / "exports" / "insights.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(export))
    seen = sharing.preview_bundle(b, path=str(path))
    assert seen["format"] == "loopflow-insights" and seen["new_insights"] == 2 and seen["unmapped_links"] == ["LF-049"]
    done = sharing.import_bundle(b, path=str(path))
    chicken = service.show_insight(b, done["ids"]["INS-071"])
    assert chicken["links"] == [done["ids"]["INS-060"], "LF-049"] and chicken["source"]["task"] == "ad-hoc"


def test_an_updated_conflict_keeps_local_tags_and_links(one: Path, two: Path) -> None:
    a, b = Context(one), Context(two)
    ids = seed(a)
    shared = carry(sharing.export_bundle(a, ids=[ids["other"]])["bundle_path"], two)
    here = sharing.import_bundle(b, path=shared)["ids"][ids["other"]]
    service.update_insight(b, here, Update(add_tags=("local",), add_links=("LF-9",)))
    data = json.loads(Path(shared).read_text())
    data["insights"][0]["content"] = "Deploys wait for Tuesday now."
    Path(shared).write_text(json.dumps(data))
    sharing.import_bundle(b, path=shared, skip_conflicts=False)
    after = service.show_insight(b, here)
    assert after["content"] == "Deploys wait for Tuesday now.\n" and after["tags"] == ["ops", "local"] and after["links"] == ["LF-9"]


# --------------------------------------------------------------------------- CLI and MCP


def test_the_sharing_commands(one: Path, two: Path) -> None:
    seed(Context(one))
    exported = run_cli("moss", "insight", "export", "--tag", "git", "--path", ".moss/exports/git.json", "--json", cwd=one)
    assert exported.returncode == 0, exported.stderr
    bundle = json.loads(exported.stdout)["bundle_path"]
    shared = carry(bundle, two)
    preview = run_cli("moss", "insight", "preview", shared, cwd=two)
    assert [line.split()[0] for line in preview.stdout.splitlines()[:3]] == ["new"] * 3 and "import the 3 new insights" in preview.stdout
    imported = json.loads(run_cli("moss", "insight", "import", shared, "--json", cwd=two).stdout)
    assert imported["imported"] == 3
    again = run_cli("moss", "insight", "import", shared, cwd=two)
    assert again.returncode == 0 and again.stdout.startswith("imported 0 new insights")
    refused = run_cli("moss", "insight", "export", "--path", "/tmp/elsewhere.json", "--json", cwd=one)
    assert refused.returncode == 2 and json.loads(refused.stderr)["error"]["details"]["reason"] == "not_allowed"


@pytest.mark.anyio
async def test_the_share_tools_over_mcp(one: Path, two: Path) -> None:
    seed(Context(one))
    async with Client(build_server(Context(one, actor=AGENT), ("share",))) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"loop_export", "loop_import_preview", "loop_import", "loop_painpoint", "loop_feedback_list"}
        exported = await client.call_tool("loop_export", {"tags": ["locks"], "reason": "for the other team"})
        assert not exported.is_error and exported.structured_content["insights_exported"] == 2
    shared = carry(exported.structured_content["bundle_path"], two)
    async with Client(build_server(Context(two, actor=AGENT), ("share",))) as client:
        preview = await client.call_tool("loop_import_preview", {"bundle_path": shared})
        assert preview.structured_content["new_insights"] == 2
        first = preview.structured_content["insights"][0]["original_id"]
        done = await client.call_tool("loop_import", {"bundle_path": shared, "selected_ids": [first]})
        assert done.structured_content["imported"] == 1
        wrong = await client.call_tool("loop_import", {"bundle_path": "/etc/passwd.json"})
        assert wrong.is_error and wrong.structured_content["error"]["code"] == "INVALID_REQUEST"
    data = json.loads(Path(shared).read_text())
    assert data["metadata"]["export_reason"] == "for the other team"

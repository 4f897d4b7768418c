"""The `moss` capsule commands as real processes, concurrency across processes, and git history."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from conftest import run_cli
from helpers import wait_for

from moss_files.cli.main import app

FULL = "## Objective\nShip login.\n\n## Status\nHalf.\n\n## Decisions\n- JWT\n\n## Next steps\n(none)\n\n## Files\n- a.py\n\n## Risks\n- none yet\n"
COMMANDS = (
    "store", "fetch", "fetch-many", "update", "append", "delete", "latest", "list", "inventory", "capsule-search", "compose", "export", "import",
    "purge", "bulk-update", "bulk-delete", "history",
)  # fmt: skip


@pytest.fixture
def ws(repo: Path) -> Path:
    (repo / ".moss").mkdir()
    return repo


def moss(ws: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", *args, cwd=ws, input=input)


def git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True, text=True).stdout


def test_every_capsule_command_is_registered_with_help_and_json() -> None:
    group = typer.main.get_command(app)
    for name in COMMANDS:
        command = group.get_command(group.context_class(group), name)  # type: ignore[attr-defined]
        assert command.help and command.help.strip(), name
        assert any("--json" in param.opts for param in command.params), name
        assert any("--root" in param.opts for param in command.params), name


def test_human_errors_show_their_details(ws: Path) -> None:
    """The JSON body always carried `details`; the human line once dropped them, so a person
    learned that a capsule was too thin but not which sections it lacked."""
    thin = moss(ws, "store", "--name", "auth", input="## Objective\nShip login.\n")
    assert thin.returncode == 4 and thin.stderr.startswith("error[CAPSULE_TOO_THIN]")
    assert "missing: Current status, Decisions, Next actions, Key locations, Open questions" in thin.stderr


def test_store_fetch_update_delete_round_trip(ws: Path) -> None:
    stored = moss(ws, "store", "--name", "auth", "--tags", "a,b", "--json", input=FULL)
    assert stored.returncode == 0, stored.stderr
    capsule_id = json.loads(stored.stdout)["id"]

    fetched = moss(ws, "fetch", "auth")
    assert fetched.returncode == 0 and fetched.stdout == FULL  # the text, byte for byte
    by_id = json.loads(moss(ws, "fetch", "--id", capsule_id, "--json").stdout)
    assert by_id["name"] == "auth" and by_id["tags"] == ["a", "b"] and by_id["fetch_key"] == {"moss_capsule": "auth", "moss_workspace": "default"}

    updated = moss(ws, "update", "auth", "--text", "-", "--title", "T", input=FULL.replace("Half", "Done"))
    assert updated.returncode == 0, updated.stderr
    appended = json.loads(moss(ws, "append", "auth", "-s", "Next steps", "-c", "- ship", "--json").stdout)
    assert appended["replaced"] is True
    assert "Done" in moss(ws, "fetch", "auth").stdout

    listing = json.loads(moss(ws, "list", "--json").stdout)
    assert listing["pagination"]["total"] == 1 and "capsule_text" not in listing["items"][0]
    assert moss(ws, "delete", "auth").returncode == 0
    assert moss(ws, "fetch", "auth").returncode == 3
    assert moss(ws, "fetch", "auth", "--include-deleted", "--no-text").returncode == 0


@pytest.mark.parametrize(
    ("args", "stdin", "exit_code", "code", "status"),
    [
        (("fetch", "missing", "--json"), None, 3, "NOT_FOUND", 404),
        (("fetch", "auth", "--id", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--json"), None, 2, "AMBIGUOUS_ADDRESSING", 400),
        (("store", "--name", "thin", "--json"), "## Objective\nx\n", 4, "CAPSULE_TOO_THIN", 422),
        (("store", "--name", "big", "--allow-thin", "--json"), "x" * 12001, 4, "CAPSULE_TOO_LARGE", 413),
        (("store", "--name", "auth", "--json"), FULL, 5, "NAME_ALREADY_EXISTS", 409),
        (("list", "--limit", "-1", "--json"), None, 2, "INVALID_REQUEST", 400),
        (("purge", "--older-than", "-3d", "--json"), None, 2, "INVALID_REQUEST", 400),
        (("update", "auth", "--json"), None, 2, "INVALID_REQUEST", 400),
    ],
)
def test_errors_have_the_seed_body_and_exit_code(ws: Path, args: tuple[str, ...], stdin: str | None, exit_code: int, code: str, status: int) -> None:
    assert moss(ws, "store", "--name", "auth", input=FULL).returncode == 0
    result = moss(ws, *args, input=stdin)
    assert result.returncode == exit_code, result.stderr
    body = json.loads(result.stderr)
    assert body["ok"] is False and (body["error"]["code"], body["error"]["status"]) == (code, status)
    assert result.stdout == ""


def test_thin_error_lists_missing_sections(ws: Path) -> None:
    result = moss(ws, "store", "--json", input="## Objective\nx\n## Files\ny\n")
    assert json.loads(result.stderr)["error"]["details"] == {"missing": ["Current status", "Decisions", "Next actions", "Open questions"]}


def test_outside_a_workspace(tmp_path: Path) -> None:
    result = run_cli("moss", "fetch", "auth", "--json", cwd=tmp_path)
    assert result.returncode == 6 and json.loads(result.stderr)["error"]["code"] == "WORKSPACE_NOT_FOUND"


def test_latest_of_an_empty_workspace_is_not_found_in_the_error_format(ws: Path) -> None:
    """It once printed `no capsules`, the one failure of the capsule commands without its code."""
    moss(ws, "store", "--name", "a", "--allow-thin", input="alpha")
    nowhere = moss(ws, "latest", "--workspace", "nowhere")
    assert nowhere.returncode == 3 and nowhere.stdout == ""
    assert nowhere.stderr.startswith("error[NOT_FOUND] ") and "'nowhere'" in nowhere.stderr
    as_json = moss(ws, "latest", "--workspace", "nowhere", "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout) == {"item": None}


def test_latest_inventory_fetch_many_and_compose(ws: Path) -> None:
    assert moss(ws, "latest").returncode == 3
    moss(ws, "store", "--name", "a", "-w", "W", "--allow-thin", input="alpha")
    moss(ws, "store", "--name", "b", "--allow-thin", input="beta")
    assert json.loads(moss(ws, "latest", "--json").stdout)["item"]["name"] == "b"
    inventory = json.loads(moss(ws, "inventory", "--json").stdout)
    assert inventory["pagination"]["total"] == 2 and inventory["sort"] == "updated_at_desc"
    many = moss(ws, "fetch-many", "b", "missing", "--items", '[{"workspace": "w", "name": "a"}]', "--json")
    assert many.returncode == 3
    result = json.loads(many.stdout)
    assert [item["name"] for item in result["items"]] == ["a", "b"] and result["errors"][0]["ref"] == {"workspace": "default", "name": "missing"}
    bundle = moss(ws, "compose", "b", "--items", '[{"workspace": "W", "name": "a"}]')
    assert bundle.stdout == "## a\n\nalpha\n\n---\n\n## b\n\nbeta\n"


def test_export_import_through_the_cli(ws: Path, tmp_path: Path) -> None:
    moss(ws, "store", "--name", "a", input=FULL)
    exported = json.loads(moss(ws, "export", "--json").stdout)
    path = Path(exported["path"])
    assert path.parent == Path.home() / ".moss/exports" and exported["count"] == 1
    again = moss(ws, "import", "-p", str(path), "--json")
    assert again.returncode == 5 and json.loads(again.stdout)["errors"][0]["code"] == "ID_COLLISION"
    other = tmp_path / "other"
    (other / ".moss").mkdir(parents=True)
    imported = run_cli("moss", "import", "-p", str(path), "--json", cwd=other)
    assert imported.returncode == 0 and json.loads(imported.stdout) == {"imported": 1, "skipped": 0, "errors": []}
    refused = moss(ws, "export", "-p", str(tmp_path / "elsewhere.jsonl"), "--json")
    assert refused.returncode == 2 and not (tmp_path / "elsewhere.jsonl").exists()


def test_export_into_the_workspace_export_folder_makes_it(repo: Path) -> None:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    assert moss(repo, "store", "--name", "a", input=FULL).returncode == 0
    assert not (repo / ".moss/exports").exists()
    exported = moss(repo, "export", "-p", ".moss/exports/all.jsonl", "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["count"] == 1
    assert (repo / ".moss/exports/all.jsonl").stat().st_mode & 0o777 == 0o600
    assert git(repo, "status", "--porcelain", "--ignored", ".moss/exports") == "!! .moss/exports/\n"  # per machine


OVERSIZED = """
import json, resource, sys
from pathlib import Path
from moss_files.capsules import service as capsules
from moss_files.foundation.errors import MossError
ctx = capsules.Context(Path(sys.argv[1]))
capsules.fetch(ctx, name="small")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    capsules.fetch(ctx, name="big")
    code = None
except MossError as err:
    code = err.code
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "grew_kib": after - before}))
"""


def test_an_oversized_capsule_file_is_refused_before_it_is_read(ws: Path) -> None:
    moss(ws, "store", "--name", "small", input=FULL)
    big = ws / ".moss/capsules/default/big.md"
    with open(big, "wb") as handle:
        handle.write(b"---\nname: big\n---\n")
        handle.truncate(50 * 1024 * 1024)  # 50 MB, over the 4 MB limit for capsule files
    fetched = moss(ws, "fetch", "big", "--json")
    assert fetched.returncode == 4 and json.loads(fetched.stderr)["error"]["code"] == "FILE_TOO_LARGE"
    measured = json.loads(subprocess.run([sys.executable, "-c", OVERSIZED, str(ws)], capture_output=True, text=True, check=True).stdout)
    assert measured["code"] == "FILE_TOO_LARGE"
    assert measured["grew_kib"] < 10 * 1024, measured  # reading the file would take 50 MB
    assert big.stat().st_size == 50 * 1024 * 1024


@pytest.mark.parametrize("content", [b"", b"\n\n", b"\r\n"], ids=["0 bytes", "blank lines", "crlf"])
def test_an_empty_capsule_file_is_refused_not_read_as_an_empty_capsule(ws: Path, content: bytes) -> None:
    moss(ws, "store", "--name", "kept", input=FULL)
    empty = ws / ".moss/capsules/default/empty.md"
    empty.write_bytes(content)
    fetched = moss(ws, "fetch", "empty", "--json")
    assert fetched.returncode == 4, fetched.stdout  # not a capsule with a made-up id
    error = json.loads(fetched.stderr)["error"]
    assert error["code"] == "EMPTY_FILE" and error["path"].endswith("default/empty.md")
    listed = json.loads(moss(ws, "list", "--json").stdout)
    assert [item["name"] for item in listed["items"]] == ["kept"]  # no capsule with a made-up id
    assert [(p["code"], p["path"]) for p in listed["problems"]] == [("EMPTY_FILE", ".moss/capsules/default/empty.md")]
    status = json.loads(moss(ws, "index", "status", "--json").stdout)
    assert ("EMPTY_FILE", ".moss/capsules/default/empty.md") in {(p["code"], p["path"]) for p in status["problems"]}
    upgrade = json.loads(moss(ws, "upgrade", "--dry-run", "--json").stdout)
    assert [(p["code"], p["path"]) for p in upgrade["problems"]] == [("EMPTY_FILE", ".moss/capsules/default/empty.md")]
    assert empty.read_bytes() == content


# --------------------------------------------------------------------------- processes at the same instant

RACER = """
import json, sys, time
from pathlib import Path
from moss_files.capsules import service as capsules
from moss_files.foundation.errors import MossError

root, go, mode, ready = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
ctx = capsules.Context(root)
ready.write_text("1")
deadline = time.monotonic() + 30
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit(9)
try:
    result = capsules.store(ctx, capsule_text="text from " + ready.name, name="race", mode=mode, allow_thin=True)
    print(json.dumps({"ok": True, "id": result["id"]}))
except MossError as err:
    print(json.dumps({"ok": False, "code": err.code, "status": err.status}))
"""


def race(ws: Path, tmp_path: Path, mode: str, count: int = 6) -> list[dict[str, object]]:
    go = tmp_path / f"go-{mode}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(ws), str(go), mode, str(tmp_path / f"ready-{mode}-{index}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    try:
        wait_for(lambda: all((tmp_path / f"ready-{mode}-{index}").exists() for index in range(count)), timeout=60, message="racers ready")
        go.write_text("go")
        outputs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outputs]
    return [json.loads(out) for out, _ in outputs]


def test_concurrent_store_mode_error_has_exactly_one_winner(ws: Path, tmp_path: Path) -> None:
    results = race(ws, tmp_path, "error")
    winners = [r for r in results if r["ok"]]
    assert len(winners) == 1
    assert sorted((r["code"], r["status"]) for r in results if not r["ok"]) == [("NAME_ALREADY_EXISTS", 409)] * 5
    files = list((ws / ".moss/capsules/default").glob("*.md"))
    assert [f.name for f in files] == ["race.md"]


def test_concurrent_store_mode_replace_keeps_one_capsule_and_its_id(ws: Path, tmp_path: Path) -> None:
    results = race(ws, tmp_path, "replace")
    assert all(r["ok"] for r in results)
    assert len({r["id"] for r in results}) == 1
    listing = json.loads(moss(ws, "list", "--json").stdout)
    assert listing["pagination"]["total"] == 1 and listing["items"][0]["id"] == results[0]["id"]


UPDATER = """
import sys
from pathlib import Path
from moss_files.capsules import service as capsules
root, field, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = capsules.Context(root)
for index in range(rounds):
    if field == "title":
        capsules.update(ctx, name="shared", title=f"title {index}")
    else:
        capsules.update(ctx, name="shared", tags=[f"tag{index}"])
"""


def test_concurrent_updates_of_different_fields_both_land(ws: Path) -> None:
    assert moss(ws, "store", "--name", "shared", input=FULL).returncode == 0
    procs = [subprocess.Popen([sys.executable, "-c", UPDATER, str(ws), field, "15"], stderr=subprocess.PIPE, text=True) for field in ("title", "tags")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    final = json.loads(moss(ws, "fetch", "shared", "--json").stdout)
    assert final["title"] == "title 14" and final["tags"] == ["tag14"]


# --------------------------------------------------------------------------- git history


def test_history_and_fetch_at_a_commit(ws: Path) -> None:
    capsule_id = moss(ws, "store", "--name", "auth", input=FULL).stdout.strip()
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "first handoff")
    first = git(ws, "rev-parse", "HEAD").strip()
    moss(ws, "update", "auth", "--text", "-", input=FULL.replace("Half.", "Done."))
    git(ws, "commit", "-qam", "second handoff")
    assert moss(ws, "delete", "auth").returncode == 0
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "retire auth")
    moss(ws, "store", "--name", "auth", "--allow-thin", input="a newer capsule")  # uncommitted, same name

    by_id = json.loads(moss(ws, "history", "--id", capsule_id, "--json").stdout)
    assert [v["summary"] for v in by_id["versions"]] == ["retire auth", "second handoff", "first handoff"]
    assert by_id["versions"][0]["path"].endswith(f"deleted/{capsule_id}.md")
    assert by_id["versions"][2]["path"] == ".moss/capsules/default/auth.md"
    assert {v["id"] for v in by_id["versions"]} == {capsule_id}
    assert not any(v["removed"] for v in by_id["versions"])
    assert by_id["versions"][0]["author"] == "Test" and len(by_id["versions"][0]["commit"]) == 40

    by_name = json.loads(moss(ws, "history", "auth", "--json").stdout)
    assert by_name["dirty"] is True  # the newer capsule is not committed yet
    assert [(v["summary"], v["removed"]) for v in by_name["versions"]] == [("retire auth", True), ("second handoff", False), ("first handoff", False)]

    # A limit by name stops git's walk early; by id it filters first. Both are the full list's start.
    for address in (["auth"], ["--id", capsule_id]):
        full = json.loads(moss(ws, "history", *address, "--json").stdout)["versions"]
        for limit in (1, 2):
            assert json.loads(moss(ws, "history", *address, "--limit", str(limit), "--json").stdout)["versions"] == full[:limit]

    old = moss(ws, "fetch", "auth", "--at", first)
    assert old.returncode == 0 and old.stdout == FULL
    at_json = json.loads(moss(ws, "fetch", "--id", capsule_id, "--at", "HEAD~1", "--json").stdout)
    assert "Done." in at_json["capsule_text"] and at_json["at"]["commit"] != first
    # One commit's reading runs git's command line alone: GitPython's load is a quarter of it.
    probe = "import sys\nfrom moss_files.cli.main import main\ntry:\n    main()\nfinally:\n    print('git' in sys.modules, file=sys.stderr)\n"
    for address in (["fetch", "auth", "--at", first], ["fetch", "--id", capsule_id, "--at", "HEAD~1", "--json"]):
        loaded = subprocess.run([sys.executable, "-c", probe, *address], cwd=ws, capture_output=True, text=True, check=False)
        assert (loaded.returncode, loaded.stderr.split()[-1]) == (0, "False"), loaded.stderr
    assert json.loads(moss(ws, "fetch", "--id", capsule_id, "--at", "HEAD~1", "--json").stdout) == at_json
    assert moss(ws, "fetch", "--id", capsule_id, "--at", "HEAD").returncode == 3  # deleted at HEAD
    assert moss(ws, "fetch", "--id", capsule_id, "--at", "HEAD", "--include-deleted").returncode == 0
    missing_rev = moss(ws, "fetch", "auth", "--at", "no-such-rev", "--json")
    assert missing_rev.returncode == 3 and json.loads(missing_rev.stderr)["error"]["code"] == "NOT_FOUND"

    # A path inside a commit is not a revision: refused before git reads anything (was INTERNAL: KeyError).
    for rev in ("HEAD:../../etc/passwd", "HEAD:.moss/capsules/default/auth.md", "HEAD~1..HEAD"):
        refused = moss(ws, "fetch", "auth", "--at", rev, "--json")
        assert refused.returncode == 2 and json.loads(refused.stderr)["error"]["code"] == "INVALID_REVISION", refused.stderr


def test_history_outside_git(tmp_path: Path) -> None:
    (tmp_path / ".moss").mkdir()
    assert run_cli("moss", "store", "--name", "a", "--allow-thin", cwd=tmp_path, input="x").returncode == 0
    result = run_cli("moss", "history", "a", "--json", cwd=tmp_path)
    assert result.returncode == 6 and json.loads(result.stderr)["error"]["code"] == "REPO_ERROR"


# --------------------------------------------------------------------------- purge asks first


def soft_deleted(ws: Path, *names: str) -> list[Path]:
    """Store and soft-delete `names`; their files under deleted/."""
    for name in names:
        assert moss(ws, "store", "--name", name, "--allow-thin", input=name).returncode == 0
        assert moss(ws, "delete", name).returncode == 0
    files = sorted((ws / ".moss" / "capsules").rglob("deleted/*.md"))
    assert len(files) == len(names)
    return files


def in_a_terminal(ws: Path, *args: str, answer: str | None, timeout: float = 60) -> tuple[int, str]:
    """Run `moss *args` with a pseudo-terminal as its stdin, stdout and stderr (a person at a
    shell); when it asks `[y/N]`, type `answer`. Returns the exit status and everything shown."""
    import os
    import pty
    import select
    import time

    main, child_end = pty.openpty()
    process = subprocess.Popen([str(Path(sys.executable).parent / "moss"), *args], cwd=ws, stdin=child_end, stdout=child_end, stderr=child_end)
    os.close(child_end)
    shown = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            if answer is not None and not answered and b"[y/N]" in shown:
                os.write(main, answer.encode() + b"\r")
                answered = True
            if process.poll() is not None and not ready:
                break
        status = process.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    return status, shown.decode(errors="replace").replace("\r\n", "\n")


def test_purge_without_a_terminal_needs_yes_and_the_dry_run_lists(ws: Path) -> None:
    """`moss purge` once deleted for ever at once, with neither a dry run nor a confirmation."""
    files = soft_deleted(ws, "old", "older")
    refused = moss(ws, "purge", "--json", input="")
    assert refused.returncode == 2 and refused.stdout == ""
    assert json.loads(refused.stderr)["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert all(path.exists() for path in files)
    human = moss(ws, "purge", input="")
    assert human.returncode == 2 and human.stderr.startswith("error[CONFIRMATION_REQUIRED]") and "--yes" in human.stderr

    preview = moss(ws, "purge", "--dry-run", "--json", input="")
    assert preview.returncode == 0, preview.stderr
    listed = json.loads(preview.stdout)
    assert listed["dry_run"] is True and listed["purged"] == 2 and sorted(item["name"] for item in listed["items"]) == ["old", "older"]
    assert all(path.exists() for path in files)
    assert "old" in moss(ws, "purge", "-n", input="").stdout
    assert json.loads(moss(ws, "purge", "--dry-run", "--yes", "--json", input="").stdout)["dry_run"] is True  # the dry run wins
    assert all(path.exists() for path in files)

    done = moss(ws, "purge", "--yes", "--json", input="")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["purged"] == 2 and not any(path.exists() for path in files)
    assert moss(ws, "purge", input="").returncode == 0  # nothing left to purge: nothing to confirm


def test_purge_at_a_terminal_asks_and_purges_only_on_yes(ws: Path) -> None:
    files = soft_deleted(ws, "old")
    status, shown = in_a_terminal(ws, "purge", answer="n")
    assert status == 0 and "[y/N]" in shown and "old" in shown, shown
    assert files[0].exists()
    status, shown = in_a_terminal(ws, "purge", answer="y")
    assert status == 0 and "Purged 1" in shown, shown
    assert not files[0].exists()

"""Format versions across clones: one clone upgrades its files (`moss upgrade`), the other edits
the same files at the old format (by hand, as an older moss-files would); git merges them
through the merge driver. Nothing is lost, nothing conflicts, and the merged files read at the
highest version either side recorded. Real git, real clones, real processes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files.foundation import document, formats
from moss_files.foundation.textmerge import Labels
from moss_files.merge import driver

pytestmark = pytest.mark.slow  # real clones, many CLI processes

V1 = Path(__file__).resolve().parent.parent / "fixtures" / "formats" / "v1"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)} failed: {done.stdout}{done.stderr}"
    return done.stdout


def tool(cwd: Path, name: str, *args: str) -> dict:
    done = run_cli(name, *args, "--json", cwd=cwd)
    assert done.returncode == 0, f"{name} {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout) if done.stdout.strip() else {}


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path]:
    """Two clones of a project whose toolkit files the previous release wrote."""
    origin = tmp_path / "origin"
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    tool(origin, "moss", "init")  # .gitattributes naming the merge driver, and the driver in this clone
    for folder in (".cstack", ".moss", ".needlecast"):
        shutil.copytree(V1 / folder, origin / folder, dirs_exist_ok=True)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "files of the previous release")
    made = []
    for name in ("upgraded", "edited"):
        git(tmp_path, "clone", "-q", str(origin), str(tmp_path / name))
        tool(tmp_path / name, "moss", "merge", "setup")
        made.append(tmp_path / name)
    return made[0], made[1]


def test_an_upgraded_clone_and_an_old_format_edit_merge_without_a_loss(clones: tuple[Path, Path]) -> None:
    upgraded, edited = clones
    assert tool(upgraded, "moss", "upgrade")["upgraded"] == 24
    git(upgraded, "add", "-A")
    git(upgraded, "commit", "-q", "-m", "moss upgrade")

    # The other clone edits the same files the way the previous release (or a person) would.
    task = next((edited / ".moss/board/tasks").glob("*.md"))
    insight = next((edited / ".moss/insights").glob("*.md"))
    edit(edited / ".moss/capsules/default/auth.md", "title: Auth + sessions", "title: Auth, sessions and tokens")
    edit(edited / ".moss/capsules/default/con.md", "title: con", "title: The console")
    edit(task, "title: Card form", "title: Card form with expiry")
    edit(insight, "status: unprocessed", "status: discussed")
    edit(edited / ".cstack/PLAN.md", "## Tasks\n", "## Tasks\n\n- [ ] P2: Written by hand #docs | modified: 2026-11-27\n")
    edit(edited / ".cstack/CURRENT.md", "_Nothing in progress yet._", "Reviewing the checkout.")
    with (edited / ".cstack/MEMORY.md").open("a") as handle:
        handle.write("- A fact added by hand.\n")
    with (edited / ".needlecast/inbox.md").open("a") as handle:
        handle.write("\n---\nid: msg-by-hand\nfrom: dave\nto: alice\ntype: task\ntime: 2026-11-27T04:00:00Z\n---\nA block appended by hand.\n")
    edit(edited / ".moss/config.toml", "# capsule_max_chars = 12000", "capsule_max_chars = 20000")
    git(edited, "add", "-A")
    git(edited, "commit", "-q", "-m", "edits at format 1")

    for ours, theirs in ((edited, upgraded), (upgraded, edited)):
        pulled = subprocess.run(["git", "pull", "--no-rebase", "--no-edit", str(theirs), "main"], cwd=ours, capture_output=True, text=True, check=False)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert git(ours, "diff", "--name-only", "--diff-filter=U") == ""

    for root in (edited, upgraded):
        # Both sides' changes are there, and every file is at its kind's current format.
        assert tool(root, "moss", "fetch", "auth")["title"] == "Auth, sessions and tokens"
        assert tool(root, "moss", "fetch", "con")["title"] == "The console"
        assert not (root / ".moss/capsules/default/con.md").exists()  # the rename and the edit merged
        assert document.parse((root / ".moss/capsules/default/%63on.md").read_text()).meta[formats.MARKER] == 2
        assert [t["title"] for t in tool(root, "moss", "task", "list")["tasks"]] == ["Card form with expiry"]
        assert tool(root, "moss", "insight", "show", insight.stem)["status"] == "discussed"
        assert "Written by hand" in {t["title"] for t in tool(root, "cstack", "plan")["tasks"]}
        assert tool(root, "cstack", "status")["focus"] == "Reviewing the checkout."
        assert "A fact added by hand." in {e["text"] for entries in tool(root, "cstack", "memory").values() for e in entries}
        inbox = tool(root, "needlecast", "inbox")
        assert "msg-by-hand" in {entry["key"] for entry in inbox["messages"]} and inbox["problems"] == []
        for relpath, kind in (
            (".cstack/PLAN.md", "plan"),
            (".cstack/CURRENT.md", "current"),
            (".cstack/MEMORY.md", "memory"),
            (".needlecast/inbox.md", "mailbox"),
        ):
            text = (root / relpath).read_text()
            assert formats.check_text(kind, text) == 1 and "moss_format" not in text, relpath  # shared with other tools: no marker
        config = (root / ".moss/config.toml").read_text()
        assert config.startswith("# moss_format: 2\n") and "\ncapsule_max_chars = 20000\n" in config
        report = tool(root, "moss", "upgrade", "--dry-run")
        assert report["upgraded"] == 0 and report["problems"] == []


def test_the_driver_keeps_the_highest_version_either_side_records(tmp_path: Path) -> None:
    """A clone with a newer moss-files (format 3) and one at format 2 both edit PLAN.md and a
    mailbox: the marker line never conflicts, the higher version is kept, the edits merge."""
    base = "<!-- moss_format: 2 -->\n# Plan\n\n## Tasks\n\n- [ ] one\n"
    ours = base + "- [ ] two\n"
    theirs = base.replace("moss_format: 2", "moss_format: 3") + "- [ ] three\n"
    merged = merge(tmp_path, ".cstack/PLAN.md", base, ours, theirs)
    assert merged.startswith("<!-- moss_format: 3 -->\n# Plan\n") and "- [ ] two\n" in merged and "- [ ] three\n" in merged
    box = "# Inbox\n\n---\nid: m1\nfrom: a\nto: b\ntime: 2026-01-01T00:00:00Z\n---\nhi\n"
    upgraded = "<!-- moss_format: 2 -->\n" + box
    appended = box + "\n---\nid: m2\nfrom: a\nto: b\ntime: 2026-01-02T00:00:00Z\n---\nagain\n"
    merged = merge(tmp_path, ".needlecast/inbox.md", box, upgraded, appended)
    assert merged.startswith("<!-- moss_format: 2 -->\n# Inbox\n") and "again\n" in merged and "<<<<<<<" not in merged


def merge(tmp_path: Path, path: str, base: str, ours: str, theirs: str) -> str:
    files = []
    for name, text in (("base", base), ("ours", ours), ("theirs", theirs)):
        file = tmp_path / f"{name}-{Path(path).name}"
        file.write_text(text)
        files.append(file)
    report = driver.run(files[0], files[1], files[2], path, Labels())
    assert report.conflicts == 0 and report.fallback is None, report
    return files[1].read_text()

"""Git as the transport: real clones in tmp_path exchange every kind of artifact by commit,
pull, merge, rebase and cherry-pick, through the merge driver `moss init` and `moss merge
setup` configure. Nothing is mocked: real git, real `moss`/`cstack`/`needlecast` processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files.foundation import document

pytestmark = pytest.mark.slow  # real clones, many CLI processes

CAPSULE = "## Objective\nShip login.\n\n## Current status\nStarted.\n\n## Decisions\n- JWT\n\n## Next actions\n- tests\n\n## Key locations\n- auth.py\n\n## Open questions\n- none\n"


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done


def tool(cwd: Path, name: str, *args: str, input: str | None = None) -> dict:
    done = run_cli(name, *args, "--json", cwd=cwd, input=input)
    assert done.returncode == 0, f"{name} {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout) if done.stdout.strip() else {}


def commit(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    """A project with one of everything, committed: the clones start from here."""
    root = tmp_path / "a"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    tool(root, "moss", "init")
    tool(root, "cstack", "add", "Base task")
    tool(root, "cstack", "remember", "The API is REST.", "--category", "facts")
    tool(root, "moss", "store", "--name", "auth", input=CAPSULE)
    tool(root, "moss", "board", "init")
    epic = tool(root, "moss", "epic", "new", "Login")["epic"]["id"]
    commit(root, "a project with one of everything")
    return root, epic


def clone(origin: Path, name: str) -> Path:
    target = origin.parent / name
    git(origin.parent, "clone", "-q", str(origin), str(target))
    tool(target, "moss", "merge", "setup")  # git never copies .git/config: once per clone
    return target


def work(root: Path, side: str, epic: str, *, start: bool) -> None:
    """What an agent does in its clone: every kind of artifact, touched."""
    tool(root, "cstack", "add", f"Task from {side}")
    if start:
        tool(root, "cstack", "start", f"Task from {side}")
    tool(root, "cstack", "remember", f"Fact found by {side}.", "--category", "facts")
    tool(root, "moss", "task", "new", f"Board task from {side}", "-e", epic)
    tool(root, "moss", "insight", "add", f"Insight from {side}")
    tool(root, "moss", "session", "start", "--agent", side, "--new")
    tool(root, "needlecast", "send", "--to", "bob", "--from", side, f"hello from {side}")


def counts(root: Path) -> dict[str, object]:
    plan = tool(root, "cstack", "plan")
    memory = tool(root, "cstack", "memory")
    outbox = tool(root, "needlecast", "outbox")
    return {
        "tasks": sorted(task["title"] for task in plan["tasks"]),
        "memory": sorted(entry["text"] for entries in memory.values() for entry in entries),
        "messages": sorted(entry["message"]["body"].strip() for entry in outbox["messages"]),
        "board": sorted(task["title"] for task in tool(root, "moss", "task", "list")["tasks"]),
        "insights": len(list((root / ".moss" / "insights").glob("*.md"))),
        "sessions": len(list((root / ".moss" / "sessions").glob("*.md"))),
    }


def conflicted(root: Path) -> list[str]:
    return git(root, "diff", "--name-only", "--diff-filter=U").stdout.split()


def test_two_clones_merge_every_kind_without_a_conflict_or_a_loss(origin: tuple[Path, str]) -> None:
    a, epic = origin
    b = clone(a, "b")
    work(a, "a", epic, start=True)
    tool(a, "moss", "update", "auth", "--title", "Login, from a")
    commit(a, "work in a")
    work(b, "b", epic, start=False)
    tool(b, "moss", "update", "auth", "--tags", "auth,b")
    commit(b, "work in b")

    pulled = git(a, "pull", "--no-rebase", "--no-edit", str(b), "main", check=False)
    assert pulled.returncode == 0 and conflicted(a) == [], pulled.stdout + pulled.stderr
    found = counts(a)
    assert found["tasks"] == ["Base task", "Task from a", "Task from b"]
    assert found["memory"] == ["Fact found by a.", "Fact found by b.", "The API is REST."]
    assert found["messages"] == ["hello from a", "hello from b"]
    assert found["board"] == ["Board task from a", "Board task from b"]
    assert (found["insights"], found["sessions"]) == (2, 2)
    capsule = tool(a, "moss", "fetch", "auth")
    assert capsule["title"] == "Login, from a" and capsule["tags"] == ["auth", "b"]
    # A person can read what happened: the log names both sides, the diff is the other side's work.
    assert "work in b" in git(a, "log", "--oneline").stdout
    assert "+- [ ] Task from b" in git(a, "diff", "HEAD~1", "--", ".cstack/PLAN.md").stdout


def test_a_third_clone_merges_both_and_rebase_and_cherry_pick_use_the_driver_too(origin: tuple[Path, str]) -> None:
    a, epic = origin
    b, c = clone(a, "b"), clone(a, "c")
    for root, side in ((a, "a"), (b, "b"), (c, "c")):
        work(root, side, epic, start=False)
        commit(root, f"work in {side}")
    # c rebases its work onto a, then merges b.
    git(c, "fetch", "-q", str(a), "main:from-a")
    rebased = git(c, "rebase", "from-a", check=False)
    assert rebased.returncode == 0, rebased.stdout + rebased.stderr
    merged = git(c, "pull", "--no-rebase", "--no-edit", str(b), "main", check=False)
    assert merged.returncode == 0 and conflicted(c) == [], merged.stdout + merged.stderr
    found = counts(c)
    assert found["tasks"] == ["Base task", "Task from a", "Task from b", "Task from c"]
    assert found["messages"] == ["hello from a", "hello from b", "hello from c"]
    assert found["memory"] == ["Fact found by a.", "Fact found by b.", "Fact found by c.", "The API is REST."]
    assert found["board"] == ["Board task from a", "Board task from b", "Board task from c"]
    # a cherry-picks b's commit alone.
    git(a, "fetch", "-q", str(b), "main:from-b")
    picked = git(a, "cherry-pick", "from-b", check=False)
    assert picked.returncode == 0 and conflicted(a) == [], picked.stdout + picked.stderr
    assert counts(a)["tasks"] == ["Base task", "Task from a", "Task from b"]


def test_a_task_both_branches_added_and_one_finished_stays_finished_whichever_side_merges(tmp_path: Path) -> None:
    """Issue 24: both sides added the same task (as a rebase or a cherry-pick leaves it) and one
    side finished it. The driver took the side that still had it pending, without a conflict or
    a note, in one merge direction only; an add on both sides is a change on both sides, and
    the status further along the workflow wins."""
    root = tmp_path / "p"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    tool(root, "cstack", "init")
    tool(root, "moss", "merge", "setup")
    commit(root, "base")
    git(root, "checkout", "-qb", "other")
    tool(root, "cstack", "add", "P2: Write docs", "--id", "docs")
    commit(root, "other")
    git(root, "checkout", "-q", "main")
    tool(root, "cstack", "add", "P2: Write docs", "--id", "docs")
    tool(root, "cstack", "add", "P2: Fix bug", "--id", "bug")
    tool(root, "cstack", "start", "docs")
    tool(root, "cstack", "done", "docs")
    commit(root, "docs done")
    git(root, "branch", "finished")
    found = {}
    for ours, theirs in (("main", "other"), ("other", "finished")):
        git(root, "checkout", "-q", ours)
        merged = git(root, "merge", "--no-edit", theirs, check=False)
        assert merged.returncode == 0 and conflicted(root) == [], merged.stdout + merged.stderr
        tasks = tool(root, "cstack", "plan")["tasks"]
        found[ours] = sorted((task["id"], task["status"]) for task in tasks)
        assert "<!-- merge: the other side's line was: - [ ] P2: Write docs (id: docs)" in (root / ".cstack" / "PLAN.md").read_text()
    assert found["main"] == found["other"] == [("bug", "pending"), ("docs", "done")]


def test_layout_v2_messages_need_no_driver(origin: tuple[Path, str]) -> None:
    a, _ = origin
    for name in ("inbox.md", "outbox.md"):
        (a / ".needlecast" / name).unlink()
    tool(a, "needlecast", "init", "--layout", "v2")
    commit(a, "switch to a file per message")
    b = clone(a, "b")
    git(b, "config", "--remove-section", "merge.moss")  # no driver at all in this clone
    for root, side in ((a, "a"), (b, "b")):
        for n in range(3):
            tool(root, "needlecast", "send", "--to", "bob", "--from", side, f"{side} {n}")
        commit(root, f"messages from {side}")
    pulled = git(b, "pull", "--no-rebase", "--no-edit", str(a), "main", check=False)
    assert pulled.returncode == 0 and conflicted(b) == []
    assert len(list((b / ".needlecast" / "outbox").glob("*.md"))) == 6


def test_a_soft_deleted_capsule_is_not_brought_back_by_an_older_edit(origin: tuple[Path, str]) -> None:
    a, _ = origin
    b = clone(a, "b")
    tool(a, "moss", "delete", "auth")
    commit(a, "delete auth")
    tool(b, "moss", "update", "auth", "--tags", "late")
    commit(b, "edit auth")
    pulled = git(a, "pull", "--no-rebase", "--no-edit", str(b), "main", check=False)
    assert pulled.returncode == 0 and conflicted(a) == [], pulled.stdout + pulled.stderr
    missing = run_cli("moss", "fetch", "auth", "--json", cwd=a)
    assert missing.returncode == 3  # still deleted
    listed = tool(a, "moss", "list", "--include-deleted")
    assert [c["tags"] for c in listed["items"] if c["name"] == "auth"] == [["late"]]  # the edit is kept, in the deleted copy


def test_two_clones_claiming_one_task_for_different_workers_leave_a_conflict(origin: tuple[Path, str]) -> None:
    a, epic = origin
    task = tool(a, "moss", "task", "new", "Contested", "-e", epic, "--status", "WORKING")["task"]["id"]
    commit(a, "a task to claim")
    b = clone(a, "b")
    for root, worker in ((a, "alice"), (b, "bob")):
        tool(root, "moss", "task", "claim", "--worker", worker, "--status", "WORKING")
        commit(root, f"{worker} claims")
    pulled = git(a, "pull", "--no-rebase", "--no-edit", str(b), "main", check=False)
    assert pulled.returncode != 0 and any(task in path for path in conflicted(a))
    shown = run_cli("moss", "task", "show", task, "--json", cwd=a)
    error = json.loads(shown.stderr)["error"]
    assert shown.returncode == 4 and error["code"] == "MERGE_CONFLICT" and error["line"] > 1


def test_two_clones_amending_one_step_offline_merge_both_amendments(origin: tuple[Path, str]) -> None:
    """Amendment ids are collision-free (AMEND-<date>-<random>, not amend-N per step), and the
    driver merges a step's amendments by id: both clones' amendments are kept, in the same
    order whichever side merges."""
    a, epic = origin
    task = tool(a, "moss", "task", "new", "Card form", "-e", epic, "--status", "planning")["task"]["id"]
    tool(a, "moss", "task", "claim", "-w", "arch", "-s", "PLANNING")
    tool(a, "moss", "task", "plan", task, "-w", "arch", "--step", "Build the form", "--step", "Write a test")
    tool(a, "moss", "task", "approve", task)
    commit(a, "a planned task")
    b = clone(a, "b")
    for root, side in ((a, "a"), (b, "b")):
        amended = tool(root, "moss", "task", "amend", task, "step-1", "-d", f"Build the form, as {side} says", "-r", f"{side} knows better")
        assert amended["amendmentId"].startswith("AMEND-") and amended["status"] == "APPROVED"
        commit(root, f"{side} amends step-1")
    merged = []
    for ours, theirs in ((a, b), (b, a)):
        pulled = git(ours, "pull", "--no-rebase", "--no-edit", str(theirs), "main", check=False)
        assert pulled.returncode == 0 and conflicted(ours) == [], pulled.stdout + pulled.stderr
        step = tool(ours, "moss", "task", "show", task)["implementationPlan"][0]
        merged.append([(x["amendmentId"], x["reason"]) for x in step["amendments"]])
        assert step["activeAmendmentId"] == step["amendments"][-1]["amendmentId"]
    assert merged[0] == merged[1] and sorted(reason for _, reason in merged[0]) == ["a knows better", "b knows better"]


def test_the_driver_handles_a_large_plan_and_outbox_quickly(origin: tuple[Path, str]) -> None:
    """The driver runs inside `git merge`; its own report says how long it took."""
    a, _ = origin
    tasks = "".join(f"- [ ] Task {n} (id: t{n}) | modified: 2026-01-01\n" for n in range(2000))
    base = f"# Plan\n\n## Tasks\n\n{tasks}\n## Completed\n\n"
    ours = base.replace("- [ ] Task 10 (id: t10)", "- [>] Task 10 (id: t10)") + "- [x] Extra ours | closed: 2026-01-02\n"
    theirs = base.replace("- [ ] Task 1999 (id: t1999)", "- [x] Task 1999 (id: t1999)")
    for name, text in (("O", base), ("A", ours), ("B", theirs)):
        (a / name).write_text(text)
    report = tool(a, "moss", "merge", "driver", "O", "A", "B", ".cstack/PLAN.md")
    assert report["conflicts"] == 0 and report["kind"] == "cstack-plan"
    merged = (a / "A").read_text()
    assert "- [>] Task 10 (id: t10)" in merged and "- [x] Task 1999 (id: t1999)" in merged and "Extra ours" in merged


def test_a_clone_without_the_driver_is_told_so(origin: tuple[Path, str]) -> None:
    a, _ = origin
    b = a.parent / "bare-clone"
    git(a.parent, "clone", "-q", str(a), str(b))  # no `moss merge setup` here
    listed = run_cli("moss", "list", cwd=b)
    assert listed.returncode == 0 and "moss merge setup" in listed.stderr and listed.stderr.count("warning") == 1
    tool(b, "moss", "merge", "setup")
    assert "moss merge setup" not in run_cli("moss", "list", cwd=b).stderr
    assert document.parse((b / ".gitattributes").read_text()).body.count("merge=moss") >= 5

"""cstack's file edge and public API on real files: stats, guarded writes, hand edits, and two
processes changing one PLAN.md at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, date, datetime
from importlib import resources
from pathlib import Path

import pytest

import cstack
from cstack import plan, store
from moss_files.foundation import fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidDocument, MossError, NotFound
from moss_files.foundation.ids import fixed_clock

TODAY = date(2026, 1, 21)
ZEROS = {"open": 0, "ready": 0, "in_progress": 0, "blocked": 0, "closed": 0, "total": 0}


def at(root: Path, day: date = TODAY) -> Context:
    """The context of the workspace at `root` on `day` (its clock stands at noon UTC)."""
    return Context(root, clock=fixed_clock(datetime(day.year, day.month, day.day, 12, tzinfo=UTC)))


def template(name: str) -> str:
    return resources.files("moss_files.templates").joinpath("cstack", name).read_text(encoding="utf-8")


@pytest.fixture
def stack(repo: Path) -> Path:
    """A project whose .cstack/ holds the three templates."""
    folder = repo / ".cstack"
    folder.mkdir()
    for name in store.FILES:
        (folder / name).write_text(template(name), encoding="utf-8")
    return repo


def test_stats_without_a_stack_is_exists_false_and_zeros(repo: Path) -> None:
    assert cstack.stats(repo) == {"exists": False, **ZEROS}
    (repo / ".cstack").mkdir()
    assert cstack.stats(repo) == {"exists": True, **ZEROS}


def test_stats_keys_in_the_sleeve_status_order(stack: Path) -> None:
    cstack.add_task(at(stack), task="P1: A", ident="a")
    cstack.add_task(at(stack), task="P1: B", depends=["a"])
    cstack.add_task(at(stack), task="C")
    cstack.transition(at(stack), action="start", task="C")
    result = cstack.stats(stack)
    assert list(result) == ["exists", "open", "ready", "in_progress", "blocked", "closed", "total"]
    assert result == {"exists": True, "open": 3, "ready": 1, "in_progress": 1, "blocked": 1, "closed": 0, "total": 3}


def test_public_readers_return_dataclasses_with_json_shapes(stack: Path) -> None:
    cstack.add_task(at(stack), task="P2: Something #x")
    parsed = cstack.read_plan(stack)
    assert isinstance(parsed, cstack.Plan)
    shape = cstack.plan_to_dict(parsed)
    assert [t["title"] for t in shape["tasks"]] == ["Something"] and shape["stats"]["total"] == 1
    status = cstack.read_status(stack)
    assert cstack.status_to_dict(status)["exists"] is True and status.last_modified is not None
    empty = cstack.read_status(stack.parent)
    assert cstack.status_to_dict(empty)["task"] is None and empty.exists is False
    assert cstack.read_plan(stack.parent).tasks == ()


def test_importing_cstack_stays_light() -> None:
    code = "import sys, cstack; print(sorted(m for m in sys.modules if m.startswith(('cstack.', 'typer', 'yaml', 'ruamel'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cstack_status_loads_only_what_current_md_needs() -> None:
    """`cstack status` runs at the start of every agent session: it must not pay for PLAN.md's
    and MEMORY.md's parsers or the scaffold."""
    code = "import sys, cstack.cli, cstack; cstack.show_status; print(sorted(m for m in sys.modules if m.startswith(('cstack.', 'moss_files.scaffold'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(["cstack.cli", "cstack.current", "cstack.markdown", "cstack.quick", "cstack.status", "cstack.store"])


def test_add_and_done_on_unmarked_files_load_neither_the_format_table_nor_ctypes_util_nor_yaml(stack: Path) -> None:
    """The format table is for marked files (an unmarked memory file is at the current version),
    find_library ran `ldconfig -p` in a child process, and the YAML reader is for frontmatter,
    which the templates lack: each cost milliseconds of a write."""
    code = textwrap.dedent(
        """
        import sys
        from datetime import UTC, datetime
        from pathlib import Path
        import cstack
        from moss_files.foundation.context import Context
        ctx = Context(Path(sys.argv[1]), clock=lambda: datetime(2026, 1, 21, tzinfo=UTC))
        cstack.add_task(ctx, task="P1: Round once", ident="r1")
        cstack.transition(ctx, action="start", task="r1")
        cstack.transition(ctx, action="done", task="r1")
        print(sorted(m for m in ("moss_files.foundation.formats", "ctypes.util", "moss_files.foundation.yaml_reader") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code, str(stack)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert "- [x] P1: Round once (id: r1)" in (stack / ".cstack" / "PLAN.md").read_text(encoding="utf-8")


def test_writes_need_a_stack_but_create_missing_files_from_templates(repo: Path) -> None:
    with pytest.raises(NotFound):
        cstack.add_task(at(repo), task="x")
    (repo / ".cstack").mkdir()
    cstack.add_task(at(repo), task="x")
    assert (repo / ".cstack" / "PLAN.md").read_text(encoding="utf-8").startswith("# Plan\n")  # no marker: cortical-stack reads it too
    with pytest.raises(NotFound):  # a transition needs an existing PLAN.md with the task
        cstack.transition(at(repo), action="start", task="nothing")


def test_start_and_done_keep_current_md_in_step(stack: Path) -> None:
    cstack.add_task(at(stack), task="User auth")
    applied = cstack.transition(at(stack), action="start", task="user")
    assert applied["current_updated"]
    assert cstack.read_status(stack).current.task == "User auth"
    finished = cstack.transition(at(stack, date(2026, 1, 22)), action="done", reason="shipped")
    assert finished["current_updated"]
    assert cstack.read_status(stack).current.task is None
    assert (stack / ".cstack" / "CURRENT.md").read_text(encoding="utf-8") == template("CURRENT.md").replace(
        "**Last Updated:** --", "**Last Updated:** 2026-01-22"
    )


def test_a_malformed_current_md_stops_a_start_before_anything_is_written(stack: Path) -> None:
    cstack.add_task(at(stack), task="Task")
    current_file = stack / ".cstack" / "CURRENT.md"
    current_file.write_bytes(b"---\nstatus: [broken\n---\n**Task:** _none_ | **Status:** --\n")
    before = {name: (stack / ".cstack" / name).read_bytes() for name in store.FILES}
    with pytest.raises(InvalidDocument) as caught:
        cstack.transition(at(stack), action="start", task="Task")
    assert caught.value.code.startswith("FRONTMATTER") and caught.value.line is not None
    assert {name: (stack / ".cstack" / name).read_bytes() for name in store.FILES} == before


def test_bom_and_crlf_survive_a_transition(stack: Path) -> None:
    path = stack / ".cstack" / "PLAN.md"
    path.write_bytes(b"\xef\xbb\xbf## Tasks\r\n\r\n- [ ] one\r\n- [ ] two\r\n")
    cstack.transition(at(stack), action="start", task="two")
    # Only the task's line changes: no format marker is added to a file cortical-stack shares.
    assert path.read_bytes() == b"\xef\xbb\xbf## Tasks\r\n\r\n- [ ] one\r\n- [>] two | modified: 2026-01-21\r\n"


@pytest.mark.parametrize(
    ("data", "code"),
    [(b"## Tasks\n- [ ] caf\xe9\n", "INVALID_ENCODING"), (b"## Tasks\n\x00\n", "BINARY_FILE"), (b"---\na: 1\n## Tasks\n- [ ] x\n", "FRONTMATTER_UNCLOSED")],
)
def test_bad_plan_files_are_reported_and_left_as_they_were(stack: Path, data: bytes, code: str) -> None:
    path = stack / ".cstack" / "PLAN.md"
    path.write_bytes(data)
    for call in (lambda: cstack.add_task(at(stack), task="y"), lambda: cstack.transition(at(stack), action="start", task="x"), lambda: cstack.stats(stack)):
        with pytest.raises(InvalidDocument) as caught:
            call()
        assert caught.value.code == code and caught.value.path == str(path)
    assert path.read_bytes() == data


def test_a_stack_symlinked_out_of_the_workspace_is_refused(tmp_path: Path, repo: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "PLAN.md").write_text("## Tasks\n", encoding="utf-8")
    (repo / ".cstack").symlink_to(outside)
    for call in (lambda: cstack.add_task(at(repo), task="x"), lambda: cstack.stats(repo), lambda: store.read_file(repo, "PLAN.md")):
        with pytest.raises(InvalidDocument) as caught:
            call()
        assert caught.value.code == "SYMLINK_REFUSED"
    assert (outside / "PLAN.md").read_text(encoding="utf-8") == "## Tasks\n"
    assert sorted(p.name for p in outside.iterdir()) == ["PLAN.md"]  # no lock or temp file either


# --------------------------------------------------------------------------- hand edits


def test_a_hand_edit_between_read_and_write_is_kept(stack: Path) -> None:
    cstack.add_task(at(stack), task="Ours")
    path = stack / ".cstack" / "PLAN.md"
    runs: list[str] = []

    def change(text: str) -> tuple[str, plan.Change]:
        if not runs:
            # An editor saves the file after we read it and before we write: a real write,
            # without the lock, as a human's editor does.
            path.write_text(text.replace("## Notes\n", "## Notes\n\nWritten by hand.\n"), encoding="utf-8")
        runs.append(text)
        made = plan.transition(text, "start", "Ours", TODAY)
        return made.text, made

    made = store.update(stack, store.PLAN, change)
    assert len(runs) == 2 and "Written by hand." in runs[1]
    final = path.read_text(encoding="utf-8")
    assert "Written by hand." in final and "- [>] Ours | modified: 2026-01-21" in final
    assert made.task.status == "in_progress"


def test_a_hand_edit_that_removes_the_task_wins_and_we_write_nothing(stack: Path) -> None:
    cstack.add_task(at(stack), task="Doomed")
    path = stack / ".cstack" / "PLAN.md"
    hand = template("PLAN.md").replace("_No notes yet._", "Removed Doomed by hand.")

    def step(snapshot: fs.Snapshot) -> bytes | None:
        if b"Doomed" in (snapshot.data or b""):
            path.write_text(hand, encoding="utf-8")
        text = (snapshot.data or b"").decode("utf-8")
        return plan.transition(text, "done", "Doomed", TODAY).text.encode("utf-8")

    with pytest.raises(MossError) as caught:
        fs.modify(path, step)
    assert caught.value.code == "NOT_FOUND"
    assert path.read_text(encoding="utf-8") == hand


# --------------------------------------------------------------------------- two processes

WORKER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    import cstack
    from moss_files.foundation.context import Context
    from moss_files.foundation.ids import fixed_clock

    root, prefix, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    ctx = Context(root, clock=fixed_clock(datetime(2026, 1, 21, 12, tzinfo=UTC)))
    for n in range(count):
        cstack.add_task(ctx, task=f"{prefix} task {n} #{prefix}", ident=f"{prefix}-{n}")
    for n in range(0, count, 2):
        cstack.transition(ctx, action="start", task=f"{prefix}-{n}")
        cstack.transition(ctx, action="done", task=f"{prefix}-{n}", reason="ok")
    for n in range(1, count, 4):
        cstack.transition(ctx, action="block", task=f"{prefix}-{n}", reason="waiting")
    """
)


def test_two_processes_changing_one_plan_lose_nothing(stack: Path) -> None:
    count = 24
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(stack), prefix, str(count)], stderr=subprocess.PIPE, text=True) for prefix in ("left", "right")
    ]
    for worker in workers:
        _out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    parsed = cstack.read_plan(stack)
    by_id = {task.id: task for task in parsed.tasks}
    assert len(parsed.tasks) == 2 * count == len(by_id)
    for prefix in ("left", "right"):
        for n in range(count):
            task = by_id[f"{prefix}-{n}"]
            if n % 2 == 0:
                assert (task.status, task.section, task.reason) == ("done", ("Completed",), "ok")
            elif n % 4 == 1:
                assert (task.status, task.blocked) == ("blocked", "waiting")
            else:
                assert task.status == "pending" and task.section == ("Tasks",)
    assert cstack.stats(stack)["closed"] == count

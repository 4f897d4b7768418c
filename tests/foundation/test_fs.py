"""Atomic writes, cross-process locks, stale-read detection and appends, with real processes."""

from __future__ import annotations

import errno
import fcntl
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import wait_for

from moss_files.foundation import document, fs
from moss_files.foundation.errors import Conflict, MossError

COUNTER_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from moss_files.foundation import fs
    path = Path(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        fs.modify(path, lambda snap: str(int(snap.data or b"0") + 1).encode())
    """
)


def test_write_atomic_leaves_no_temporary_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("old")
    path.chmod(0o640)
    fs.write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]


def test_create_exclusive_never_replaces(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    assert fs.create_exclusive(path, b"first")
    assert not fs.create_exclusive(path, b"second")
    assert path.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.md"]


def test_two_processes_incrementing_under_the_lock_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "counter.txt"
    workers = [subprocess.Popen([sys.executable, "-c", COUNTER_SCRIPT, str(path), "150"]) for _ in range(3)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    assert path.read_bytes() == b"450"


def test_threads_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "counter.txt"

    def bump() -> None:
        for _ in range(100):
            fs.modify(path, lambda snap: str(int(snap.data or b"0") + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert path.read_bytes() == b"400"


def test_a_hand_edit_between_read_and_write_is_never_clobbered(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("---\nstatus: open\ntitle: T\n---\nbody\n")
    calls = []

    def transform(doc: document.Document) -> str:
        calls.append(doc.text)
        if len(calls) == 1:
            # An editor saves the file after we read it and before we write (it takes no lock).
            path.write_text(doc.text.replace("title: T", "title: Edited by hand"))
        return document.edit_frontmatter(doc.text, {"status": "done"})

    fs.modify_document(path, transform)
    assert len(calls) == 2
    assert path.read_text() == "---\nstatus: done\ntitle: Edited by hand\n---\nbody\n"


def test_write_if_unchanged_refuses_a_stale_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("one")
    snapshot = fs.read_snapshot(path)
    path.write_text("two")
    with fs.locked(path), pytest.raises(Conflict) as caught:
        fs.write_if_unchanged(snapshot, b"three")
    assert caught.value.code == "STALE_WRITE"
    assert path.read_text() == "two"


def test_a_file_that_keeps_changing_ends_in_a_conflict_not_a_clobber(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("0")

    def transform(snapshot: fs.Snapshot) -> bytes:
        path.write_text(str(int(snapshot.data or b"0") + 100))  # a writer that never stops
        return b"tool"

    with pytest.raises(Conflict) as caught:
        fs.modify(path, transform, retries=3)
    assert caught.value.code == "STALE_WRITE"
    assert path.read_text() != "tool"


def test_lock_timeout_when_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from moss_files.foundation import fs\n"
            "with fs.locked(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(Conflict) as caught, fs.locked(path, timeout=0.2):
            pass
        assert caught.value.code == "LOCK_TIMEOUT"
    finally:
        holder.communicate("", timeout=30)
    with fs.locked(path, timeout=5):  # released when the holder exits
        pass


def test_a_waiter_that_timed_out_never_keeps_the_lock_once_its_holder_lets_go(tmp_path: Path) -> None:
    # The waiter blocks in flock(2) on a thread of its own; after LOCK_TIMEOUT that thread is
    # left waiting, and when it gets the lock late it must let it go at once.
    path = tmp_path / "doc.md"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from moss_files.foundation import fs\n"
            "with fs.locked(Path(sys.argv[1])):\n    print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    waits: list[int] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(Conflict) as caught, fs.locked(path, timeout=0.3, while_waiting=lambda: waits.append(1)):
            pass
        assert caught.value.code == "LOCK_TIMEOUT"
        assert waits  # the wait did the caller's work meanwhile
        paced: list[int] = []

        def pace() -> float:
            paced.append(1)
            return 60.0  # nothing to do again for a minute

        with pytest.raises(Conflict), fs.locked(path, timeout=1.0, while_waiting=pace):
            pass
        assert paced == [1]  # not woken again before the timeout to learn it
    finally:
        holder.communicate("", timeout=30)
    wait_for(lambda: not any(t.name == "moss-flock-wait" for t in threading.enumerate()), timeout=10, message="the abandoned waiter ended")
    # Free for another process at once (timeout 0: no waiting at all).
    probe = "import sys; from pathlib import Path; from moss_files.foundation import fs\nwith fs.locked(Path(sys.argv[1]), timeout=0): print('got')"
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "got", done.stderr


def test_concurrent_appends_keep_every_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    script = (
        "import sys; from pathlib import Path; from moss_files.foundation import fs\n"
        'for i in range(200): fs.append_line(Path(sys.argv[1]), (\'{"w": %s, "i": %d, "pad": "%s"}\' % (sys.argv[2], i, \'x\' * 300)).encode())'
    )
    workers = [subprocess.Popen([sys.executable, "-c", script, str(path), str(n)]) for n in range(4)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 800
    assert all(line.startswith('{"w": ') and line.endswith('"}') for line in lines)


def test_scanners_skip_our_temporary_and_lock_files(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("x")
    (tmp_path / ".a.md.lock").write_text("")
    (tmp_path / f".b.md{fs.TEMP_MARKER}123-abcd").write_text("x")
    assert [p.name for p in fs.iter_files(tmp_path)] == ["a.md"]


def test_read_document_of_a_missing_file_is_not_found(tmp_path: Path) -> None:
    from moss_files.foundation.errors import NotFound

    with pytest.raises(NotFound):
        fs.read_document(tmp_path / "missing.md")
    assert not os.path.exists(tmp_path / "missing.md")


def test_an_editor_save_racing_tool_writes_is_never_lost(tmp_path: Path) -> None:
    """An editor saves (new content, atomic rename, no lock) while the tool rewrites the file in
    a loop; the tool must never replace a save it did not read. (Before writes were swapped in
    and checked, about half of these rounds lost the editor's save.)"""
    for round_number in range(25):
        # A file of its own each round: a reset of one file to "base" would be a hand save that
        # drops every line of the save an earlier round's undone write kept, and the next write
        # would rightly fold that save back (test_a_late_save_of_an_undone_write_...).
        path = tmp_path / f"doc-{round_number}.md"
        path.write_bytes(b"base\n")
        stop = threading.Event()

        def tool() -> None:
            while not stop.is_set():
                try:
                    fs.modify(path, lambda snap: snap.data + b"T\n" if (snap.data or b"").count(b"T\n") < 200 else None)
                except Conflict:
                    pass  # the file kept changing: a refusal, never a clobber

        worker = threading.Thread(target=tool)
        worker.start()
        try:
            wait_for(lambda: path.read_bytes().count(b"T\n") >= 2, message="the tool to be writing")
            saved = f"saved by an editor, round {round_number}\n".encode()
            editor_temp = tmp_path / f"editor-save-{round_number}.tmp"
            editor_temp.write_bytes(saved)
            os.replace(editor_temp, path)
            wait_for(
                lambda: (lambda data: data.startswith(saved) and data.count(b"T\n") >= 2)(path.read_bytes()),
                timeout=5,
                message=f"round {round_number}: the tool to build on the editor's save",
            )
        finally:
            stop.set()
            worker.join(timeout=30)


TOOL_WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from moss_files.foundation import fs
    from moss_files.foundation.errors import Conflict, MossError
    path, stop_file, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    n = refused = 0
    while not stop_file.exists():
        n += 1
        try:
            fs.modify(path, lambda snap: snap.data + f"T {tag} {n}\\n".encode(), retries=2)
        except Conflict:
            refused += 1  # the file kept changing: a refusal, never a clobber
    print(n - refused, refused)
    """
)


@pytest.mark.slow  # a race run for hundreds of rounds
def test_an_editor_saving_during_a_tools_undo_loses_nothing(tmp_path: Path) -> None:
    """Tools rewrite a large file while an editor keeps saving it (read, add a line, write a
    temporary, rename; no lock). A save that lands while a write is being undone must not be
    lost: before the undo checked what its second swap displaced, a save landing while the
    tool compared the displaced file (a large file makes that take milliseconds) was deleted
    with the tool's temporary, and every run of this test lost dozens of lines. Every line the
    editor saved must survive, in the file or, when two saves land inside one undo, in the
    copy the tool keeps and names."""
    path = tmp_path / "PLAN.md"
    path.write_bytes(b"".join(b"filler line %d of a long plan\n" % n for n in range(250_000)))
    stop_file = tmp_path / "stop"
    tools = [
        subprocess.Popen([sys.executable, "-c", TOOL_WRITER_SCRIPT, str(path), str(stop_file), str(i)], stdout=subprocess.PIPE, text=True) for i in range(2)
    ]
    saved: list[str] = []
    pause = random.Random(7)
    temp = tmp_path / "editor.tmp"
    deadline = time.monotonic() + 60
    try:
        while len(saved) < 300 and time.monotonic() < deadline:
            line = f"H {len(saved) + 1}"
            temp.write_bytes(path.read_bytes() + line.encode() + b"\n")
            os.replace(temp, path)
            saved.append(line)
            time.sleep(pause.uniform(0.0, 0.03))  # the editor's own pace, not a wait on a result
    finally:
        stop_file.touch()
        outcomes = [tool.communicate(timeout=60)[0].split() for tool in tools]
    assert all(tool.returncode == 0 for tool in tools)
    written = sum(int(out[0]) for out in outcomes)
    refused = sum(int(out[1]) for out in outcomes)
    # The race was run: the tools wrote, and were refused when a save came in between.
    assert written > 0 and refused > 0 and len(saved) == 300, (written, refused, len(saved))
    # The next write folds back what the kept copies hold (issue 24: they were left for a
    # person to compare and delete); every line the editor saved is in the file itself.
    fs.modify(path, lambda snap: None)
    final = path.read_text()
    lost = [line for line in saved if f"\n{line}\n" not in final]
    assert lost == [], f"{len(lost)} of {len(saved)} hand lines lost"
    assert [p.name for p in tmp_path.iterdir() if fs.TEMP_MARKER in p.name and p != fs.displaced_folder(path)] == []
    # Once their time is over, the next write removes the copies and their folder.
    age_displaced(path)
    fs.modify(path, lambda snap: None)
    assert not fs.displaced_folder(path).exists() and path.read_text() == final


def age_displaced(path: Path) -> None:
    """Make the copies kept for `path` older than their keeping time, as the clock would."""
    folder = fs.displaced_folder(path)
    if folder.exists():
        old = time.time() - fs.KEEP_DISPLACED_SECONDS - 60
        for copy in folder.iterdir():
            os.utime(copy, (old, old))


def keep_displaced(path: Path, base: str, kept: str, *, with_base: bool = True) -> Path:
    """What an undone write leaves (`fs.write_if_unchanged`): the save it displaced, kept in
    the displaced folder, with what the write had read."""
    folder = fs.displaced_folder(path)
    folder.mkdir(exist_ok=True)
    token = f"{os.getpid()}-{os.urandom(4).hex()}"
    copy = folder / f".kept{fs.TEMP_MARKER}{token}"
    copy.write_text(kept)
    if with_base:
        (folder / f".base{fs.TEMP_MARKER}{token}").write_text(base)
    return copy


def test_a_late_save_of_an_undone_write_gets_the_displaced_save_folded_back(tmp_path: Path) -> None:
    """An editor read the tool's bytes in the instant an undone write showed them, and saved
    later: its save lacks the line of the save the write displaced. The next write puts that
    line back, keeping the tool's line and the late save's own."""
    path = tmp_path / "PLAN.md"
    base = "# Plan\n\n- [ ] first\n"
    keep_displaced(path, base, base + "- [ ] hand line\n")
    path.write_text(base + "- [ ] tool line\n- [ ] late save line\n")
    fs.modify(path, lambda snap: (snap.data or b"") + b"- [ ] next tool line\n")
    assert path.read_text() == base + "- [ ] tool line\n- [ ] late save line\n- [ ] hand line\n- [ ] next tool line\n"
    assert len(list(fs.displaced_folder(path).iterdir())) == 2  # kept a while: another late save may come
    fs.modify(path, lambda snap: None)
    assert path.read_text().count("hand line") == 1  # folded once
    age_displaced(path)
    fs.modify(path, lambda snap: None)
    assert not fs.displaced_folder(path).exists()


def test_a_kept_copy_whose_lines_the_file_holds_is_not_folded_and_goes_after_its_time(tmp_path: Path) -> None:
    path = tmp_path / "PLAN.md"
    base = "one\ntwo\n"
    keep_displaced(path, base, base + "hand\n")
    path.write_text("one\nhand\nlater\n")  # the displaced save itself, edited on: "two" removed on purpose
    fs.modify(path, lambda snap: None)
    assert path.read_text() == "one\nhand\nlater\n"  # nothing brought back
    assert fs.displaced_folder(path).exists()
    age_displaced(path)
    fs.modify(path, lambda snap: None)
    assert not fs.displaced_folder(path).exists() and path.read_text() == "one\nhand\nlater\n"


def test_a_kept_copy_that_added_no_line_goes_at_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "PLAN.md"
    keep_displaced(path, "one\ntwo\n", "one\n")  # the displaced save only removed a line
    path.write_text("one\ntwo\ntool\n")
    fs.modify(path, lambda snap: None)
    assert not fs.displaced_folder(path).exists() and path.read_text() == "one\ntwo\ntool\n"


def test_lines_the_late_save_and_the_displaced_save_both_changed_come_back_between_markers(tmp_path: Path) -> None:
    from moss_files.foundation import conflicts

    path = tmp_path / "PLAN.md"
    keep_displaced(path, "title\nstatus: open\n", "title\nstatus: done by hand\n")
    path.write_text("title\nstatus: done by the tool\n")
    fs.modify(path, lambda snap: None)
    text = path.read_text()
    assert conflicts.first_marker_line(text) is not None
    assert "status: done by hand\n" in text and "status: done by the tool\n" in text


def test_a_kept_copy_without_its_base_is_kept_while_it_holds_lines_the_file_lacks(tmp_path: Path) -> None:
    """A crash between keeping a copy and recording its base leaves a copy that cannot be
    folded safely: it stays while it holds a line the file lacks, and goes once it does not."""
    path = tmp_path / "PLAN.md"
    copy = keep_displaced(path, "", "one\nhand\n", with_base=False)
    path.write_text("one\n")
    age_displaced(path)
    fs.modify(path, lambda snap: None)
    assert copy.exists() and path.read_text() == "one\n"
    path.write_text("one\nhand\n")
    fs.modify(path, lambda snap: None)
    assert not fs.displaced_folder(path).exists()


def test_copies_earlier_versions_kept_beside_the_file_go_once_the_file_holds_their_lines(tmp_path: Path) -> None:
    """Earlier versions kept each displaced save beside the file and told the user to compare
    and delete it by hand (issue 24: 14 in a minute of an editor racing cstack). The next
    write removes those whose lines the file holds; one with a line the file lacks stays."""
    path = tmp_path / "PLAN.md"
    path.write_text("one\nhand\ntool\n")
    held = tmp_path / ".PLAN.md.tmp-displaced-123-aaaa1111"
    held.write_text("one\nhand\n")
    lacking = tmp_path / ".PLAN.md.tmp-displaced-123-bbbb2222"
    lacking.write_text("one\nanother hand\n")
    old = time.time() - fs.KEEP_DISPLACED_SECONDS - 60
    for copy in (held, lacking):
        os.utime(copy, (old, old))
    fs.modify(path, lambda snap: (snap.data or b"") + b"next\n")
    assert not held.exists() and lacking.exists()
    assert path.read_text() == "one\nhand\ntool\nnext\n"


# --------------------------------------------------------------------------- things that are not files

NOT_A_FILE = """
import os, sys
from pathlib import Path
from moss_files.foundation import fs
from moss_files.foundation.errors import MossError

path, operation = Path(sys.argv[1]), sys.argv[2]
try:
    if operation == "read_bytes":
        fs.read_bytes(path)
    elif operation == "read_snapshot":
        fs.read_snapshot(path)
    elif operation == "read_if_present":
        fs.read_if_present(path)
    elif operation == "read_in":
        with fs.folder_fd(path.parent) as dir_fd:
            fs.read_in(dir_fd, path.name)
    elif operation == "read_given_file":
        fs.read_given_file(path, max_bytes=1024, what="import file")
    elif operation == "modify":
        fs.modify(path, lambda snapshot: b"new")
    elif operation == "write_if_unchanged":
        stale = fs.Snapshot(path, b"old", fs.digest_of(b"old"))  # no identity: as a snapshot of what was written
        with fs.locked(path):
            fs.write_if_unchanged(stale, b"new")
    print("read")
except MossError as err:
    print(err.code, err.details.get("type"))
"""


@pytest.mark.parametrize("operation", ["read_bytes", "read_snapshot", "read_if_present", "read_in", "read_given_file", "modify", "write_if_unchanged"])
def test_a_fifo_where_a_file_should_be_is_refused_without_waiting_for_a_writer(tmp_path: Path, operation: str) -> None:
    path = tmp_path / ".moss" / "capsules" / "default" / "a.md"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    # A subprocess with a deadline: a read that waits on the FIFO must fail the test, not hang it.
    done = subprocess.run([sys.executable, "-c", NOT_A_FILE, str(path), operation], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["NOT_REGULAR_FILE", "fifo"], done.stderr


def test_read_if_present_reads_what_read_snapshot_reads_and_refuses_what_it_refuses(tmp_path: Path) -> None:
    folder = tmp_path / ".cstack"
    folder.mkdir()
    (folder / "PLAN.md").write_bytes(b"# Plan\r\n\xc3\xa9\n")
    (folder / "empty.md").write_bytes(b"")
    (folder / "link.md").symlink_to(folder / "PLAN.md")
    for name in ("PLAN.md", "empty.md", "missing.md"):
        assert fs.read_if_present(folder / name) == fs.read_snapshot(folder / name).data, name
    for path, max_bytes in ((folder / "link.md", None), (folder / "PLAN.md", 3), (folder / "PLAN.md" / "below.md", None)):
        with pytest.raises(MossError) as plain:
            fs.read_if_present(path, max_bytes=max_bytes)
        with pytest.raises(MossError) as hashed:
            fs.read_snapshot(path, max_bytes=max_bytes)
        assert (plain.value.code, type(plain.value)) == (hashed.value.code, type(hashed.value)), path


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is a Linux system call")
def test_a_write_swaps_by_renameat2_without_asking_ldconfig(tmp_path: Path) -> None:
    """The atomic exchange of a save found renameat2 through ctypes.util.find_library, which
    runs `ldconfig -p` in a child process and loads tempfile and random: ~15 ms of every
    `cstack add`. The interpreter's own symbols hold the C library's functions."""
    path = tmp_path / ".cstack" / "PLAN.md"
    path.parent.mkdir()
    path.write_bytes(b"old\n")
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from moss_files.foundation import fs
        fs.modify(Path(sys.argv[1]), lambda snapshot: b"new\\n")
        print(fs._renameat2_state.get("call") is not None, "ctypes.util" in sys.modules, "ctypes" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    # Nor does it import ctypes itself (its C types cost ~2 ms): the call is bound through _ctypes.
    assert done.stdout.split() == ["True", "False", "False"]
    assert path.read_bytes() == b"new\n"


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is a Linux system call")
def test_the_bare_renameat2_binding_answers_as_the_typed_ctypes_one(tmp_path: Path) -> None:
    """renameat2 bound through _ctypes (what a save's exchange uses) and through ctypes with its
    argument types (the fallback) do the same to the same files and return the same errno."""
    import _ctypes

    bare = fs._bare_libc_function("renameat2")
    typed = fs._typed_renameat2()
    assert bare is not None and typed is not None
    assert fs._bare_libc_function("no_such_function_in_libc") is None
    outcomes = []
    for label, call in (("bare", bare), ("typed", typed)):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "a").write_bytes(b"A")
        (folder / "b").write_bytes(b"B")
        results = []
        with fs.folder_fd(folder) as dir_fd:
            for source, target, flags in (
                ("a", "b", fs.RENAME_EXCHANGE),
                ("a", "gone", fs.RENAME_EXCHANGE),
                ("a", "b", fs.RENAME_NOREPLACE),
                ("a", "c", fs.RENAME_NOREPLACE),
            ):
                code = call(dir_fd, os.fsencode(source), dir_fd, os.fsencode(target), flags)
                results.append((code, _ctypes.get_errno() if code != 0 else 0))
        outcomes.append((results, sorted((p.name, p.read_bytes()) for p in folder.iterdir())))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == [(0, 0), (-1, errno.ENOENT), (-1, errno.EEXIST), (0, 0)]
    assert outcomes[0][1] == [("b", b"A"), ("c", b"B")]


def test_the_changed_since_read_check_compares_bytes_as_the_digests_would(tmp_path: Path) -> None:
    """_inspect compares the bytes of a file whose identity is unchanged (exact, and cheaper
    than hashing a large file); its answer is the digests' answer."""
    path = tmp_path / "PLAN.md"
    path.write_bytes(b"x" * 100_000 + b"\n")
    read = fs.read_snapshot(path)
    same_identity_other_bytes = fs.Snapshot(path, b"y" * 100_000 + b"\n", fs.digest_of(b"y" * 100_000 + b"\n"), read.identity)
    with fs.folder_fd(tmp_path) as dir_fd:
        assert fs._inspect(dir_fd, path.name, read) is None
        changed = fs._inspect(dir_fd, path.name, same_identity_other_bytes)
    assert changed is not None and changed.data == read.data and changed.digest == read.digest != same_identity_other_bytes.digest
    with fs.locked(path):
        fs.write_if_unchanged(read, b"new\n")
    assert path.read_bytes() == b"new\n"


def test_a_snapshots_digest_is_computed_when_asked_and_equals_the_given_one(tmp_path: Path) -> None:
    """Snapshot hashes its bytes on first use of `digest` (a write compares bytes and never asks
    unless the file changed); the value, equality, hash and copies are those of a snapshot made
    with the digest given, as the frozen dataclass did."""
    import copy
    import pickle

    path = tmp_path / "PLAN.md"
    path.write_bytes(b"- [ ] one\n" * 10_000)
    read = fs.read_snapshot(path)
    assert read._digest is None  # nothing hashed by reading
    eager = fs.Snapshot(path, read.data, fs.digest_of(read.data), read.identity)
    assert read.digest == eager.digest == fs.digest_of(path.read_bytes())
    assert read == eager and hash(read) == hash(eager) and repr(read) == repr(eager)
    assert fs.read_snapshot(tmp_path / "missing.md").digest == "" == fs.digest_of(None)
    assert fs.Snapshot(path, b"x", "given").digest == "given"  # a given digest is kept, as before
    assert read != fs.Snapshot(path, b"other", None, read.identity) and read != (path, read.data)
    for clone in (pickle.loads(pickle.dumps(read)), copy.deepcopy(read), copy.copy(read)):
        assert clone == read and clone.digest == read.digest
    matched: tuple[object, ...] = ()
    match fs.read_snapshot(path):
        case fs.Snapshot(matched_path, data, digest, identity):
            matched = (matched_path, data, digest, identity)
    assert matched == (path, read.data, eager.digest, read.identity)
    with pytest.raises(AttributeError):
        read.data = b""  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del read.path  # type: ignore[misc]

    written = fs.modify(path, lambda snapshot: snapshot.data + b"- [ ] two\n" if snapshot.data else None)
    assert written._digest is None and written.data == path.read_bytes()
    assert written.digest == fs.read_snapshot(path).digest == fs.digest_of(path.read_bytes())
    # The changed-since-read check still refuses a file whose bytes changed (it hashes only then).
    stale = fs.read_snapshot(path)
    path.write_bytes(b"a hand edit\n")
    with pytest.raises(Conflict) as refused:
        fs.write_if_unchanged(stale, b"ours\n")
    assert refused.value.code == "STALE_WRITE" and path.read_bytes() == b"a hand edit\n"


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named temporary"])
def test_create_exclusive_writes_a_file_given_in_parts_and_asks_for_them_only_to_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
    """A migration report of a hundred thousand items is written from parts, never held whole;
    a place already taken is refused before a part is asked for."""
    if not unnamed:
        monkeypatch.setitem(fs._tmpfile_state, "off", True)  # the file systems without O_TMPFILE
    calls: list[int] = []

    def parts() -> list[bytes]:
        calls.append(1)
        return [b"{\n", b'  "a": 1\n', b"}\n"]

    target = tmp_path / "report.json"
    assert fs.create_exclusive(target, parts) is True
    assert target.read_bytes() == b'{\n  "a": 1\n}\n' and len(calls) == 1
    assert fs.create_exclusive(target, parts) is False and len(calls) == 1
    assert sorted(os.listdir(tmp_path)) == ["report.json"]


def test_a_file_opened_keeps_the_flags_asked_for_and_blocks_again(tmp_path: Path) -> None:
    """open_regular opens without blocking (a FIFO is refused, never waited on) and then clears
    O_NONBLOCK from the flags it was given: an append stays an append."""
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\n")
    for asked in (os.O_RDONLY, os.O_WRONLY | os.O_APPEND):
        fd = fs.open_regular(path, flags=asked)
        try:
            status = fcntl.fcntl(fd, fcntl.F_GETFL)
            assert not status & os.O_NONBLOCK
            assert bool(status & os.O_APPEND) == bool(asked & os.O_APPEND)
            if asked & os.O_APPEND:
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, b"two\n")
        finally:
            os.close(fd)
    assert path.read_bytes() == b"one\ntwo\n"

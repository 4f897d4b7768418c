"""`fs.folders_held()`: inside it each toolkit folder is opened once, with every promise of the
walk outside it (no link followed, missing folders made only when asked), and nothing leaks."""

from __future__ import annotations

import os
import threading
from contextlib import nullcontext
from pathlib import Path

import pytest

from moss_files.foundation import fs
from moss_files.foundation.errors import MossError


def open_descriptors() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def same_folder(fd: int, path: Path) -> bool:
    held, there = os.fstat(fd), path.stat()
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def test_a_folder_is_opened_once_and_every_descriptor_closes_with_the_scope(tmp_path: Path) -> None:
    tasks = tmp_path / ".moss" / "board" / "tasks"
    tasks.mkdir(parents=True)
    before = open_descriptors()
    with fs.folders_held():
        with fs.folder_fd(tasks) as first:
            pass
        with fs.folder_fd(tasks) as second:
            assert second == first and same_folder(second, tasks)
        with fs.folder_fd(tasks.parent) as board:  # the folders above were kept on the way down
            assert same_folder(board, tasks.parent)
        mine = fs.open_folder(tasks)  # the caller's own descriptor, which it closes
        assert mine != first and same_folder(mine, tasks)
        os.close(mine)
        with fs.folder_fd(tasks) as again:
            assert again == first  # closing the duplicate left the scope's descriptor open
        held = open_descriptors() - before
        assert len(held) == 4  # the workspace root, .moss, board, tasks
    assert open_descriptors() == before


def test_open_folder_gives_a_descriptor_whose_listing_is_its_own(tmp_path: Path) -> None:
    folder = tmp_path / ".moss" / "board" / "tasks"
    folder.mkdir(parents=True)
    for name in ("a.md", "b.md", "c.md"):
        (folder / name).write_text("x")
    with fs.folders_held():
        with fs.folder_fd(folder) as shared:
            outer = os.scandir(shared)
            next(outer)  # a listing under way through the scope's descriptor
            mine = fs.open_folder(folder)
            try:
                assert sorted(os.listdir(mine)) == ["a.md", "b.md", "c.md"]  # from its start
            finally:
                os.close(mine)
            outer.close()


def test_a_scope_inside_a_scope_leaves_the_descriptors_to_the_outer_one(tmp_path: Path) -> None:
    folder = tmp_path / ".moss" / "x"
    folder.mkdir(parents=True)
    with fs.folders_held():
        with fs.folders_held(), fs.folder_fd(folder) as inner:
            pass
        os.fstat(inner)  # still open: the outer scope closes it
        with fs.folder_fd(folder) as outer:
            assert outer == inner


def test_a_link_on_the_way_is_refused_inside_the_scope_as_outside(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".moss").mkdir()
    (tmp_path / ".moss" / "board").symlink_to(tmp_path / "elsewhere")
    for scoped in (False, True):
        with fs.folders_held() if scoped else nullcontext():
            with pytest.raises(MossError) as refused, fs.folder_fd(tmp_path / ".moss" / "board" / "tasks", create=True):
                pass
            assert refused.value.code == "SYMLINK_REFUSED"
    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing was made through the link


def test_a_missing_folder_is_made_only_when_asked_and_found_once_made(tmp_path: Path) -> None:
    folder = tmp_path / ".moss" / "board" / "workers"
    with fs.folders_held():
        with pytest.raises(FileNotFoundError), fs.folder_fd(folder):
            pass
        folder.mkdir(parents=True)  # made by another writer meanwhile: a miss is not remembered
        with fs.folder_fd(folder) as found:
            assert same_folder(found, folder)
        with fs.folder_fd(folder / "deeper", create=True) as made:
            assert same_folder(made, folder / "deeper")


def test_writes_inside_the_scope_land_in_the_folders_and_a_removed_folder_fails_loudly(tmp_path: Path) -> None:
    folder = tmp_path / ".moss" / "board" / "tasks"
    folder.mkdir(parents=True)
    with fs.folders_held():
        fs.write_atomic(folder / "a.md", b"one\n")
        fs.write_atomic(folder / "b.md", b"two\n")
        assert (folder / "a.md").read_bytes() == b"one\n" and (folder / "b.md").read_bytes() == b"two\n"
        # Another program takes the folder away and makes it again: the scope's descriptor names
        # the removed folder, where nothing can be made, so the write fails; it never lands
        # somewhere nobody looks.
        for name in ("a.md", "b.md"):
            (folder / name).unlink()
        folder.rmdir()
        folder.mkdir()
        with pytest.raises(FileNotFoundError):
            fs.write_atomic(folder / "c.md", b"three\n")
    assert list(folder.iterdir()) == []
    fs.write_atomic(folder / "c.md", b"three\n")  # outside the scope the walk starts afresh
    assert (folder / "c.md").read_bytes() == b"three\n"


def test_past_its_limit_the_scope_walks_as_outside_and_leaks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fs, "HELD_FOLDERS_MAX", 3)
    folders = [tmp_path / ".moss" / "board" / name for name in ("tasks", "workers", "teams", "epics")]
    for folder in folders:
        folder.mkdir(parents=True)
    before = open_descriptors()
    with fs.folders_held():
        for _ in range(3):
            for folder in folders:
                with fs.folder_fd(folder) as fd:
                    assert same_folder(fd, folder)
                mine = fs.open_folder(folder)
                assert same_folder(mine, folder)
                os.close(mine)
        assert len(open_descriptors() - before) == 3  # the root, .moss and board: no more kept
    assert open_descriptors() == before


def test_another_thread_does_not_share_the_scope(tmp_path: Path) -> None:
    folder = tmp_path / ".moss" / "x"
    folder.mkdir(parents=True)
    seen: list[int] = []

    def other() -> None:
        with fs.folder_fd(folder) as fd:
            seen.append(fd)

    with fs.folders_held(), fs.folder_fd(folder) as mine:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen and seen[0] != mine

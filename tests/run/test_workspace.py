"""The workspace's integrity check after an agent: it reads no more than the task's own files
held, walks any shape of folder without recursing, and writes restored files only inside the
workspace's own folders. What an agent leaves that it cannot check rejects the candidate, naming
the path and what to do; it never raises, hangs or writes through a link."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import attrs
import pytest

from aka_core.builtin.operator_tasks import load_task
from aka_core.models import Task
from aka_core.plugin.host import PluginHost
from aka_core.run import workspace as ws

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def task(tmp_path: Path) -> Task:
    """triton2triton/gelu with a folder of its own: lib/helpers.py (protected), lib/tuned.py
    (editable)."""
    base = load_task(REPO / "tasks" / "triton2triton" / "gelu", "triton2triton/gelu", PluginHost())
    root = tmp_path / "task"
    shutil.copytree(base.root, root)
    (root / "lib").mkdir()
    (root / "lib" / "helpers.py").write_text("HELPER = 'task'\n")
    (root / "lib" / "tuned.py").write_text("TUNED = 1\n")
    return attrs.evolve(base, root=root, editable=(*base.editable, "lib/tuned.py"))


def prepared(task: Task, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    workspace = tmp_path / "run" / "workspace"
    return workspace, ws.prepare_workspace(task, workspace)


def in_time(fn, seconds: float):  # type: ignore[no-untyped-def]
    """``fn()``'s result, or a failure when it has not returned within ``seconds``."""
    done: dict[str, object] = {}
    thread = threading.Thread(target=lambda: done.update(result=fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert "result" in done, f"still running after {seconds} s"
    return done["result"]


def test_an_untouched_workspace_is_intact(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    report = ws.check_and_restore(task, workspace, before)
    assert report.ok and not report.changed_files and not report.added_files


def test_changed_protected_files_are_restored_and_edits_kept(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    (workspace / "reference.py").write_text("def gelu_reference(x):\n    return x\n")
    (workspace / "lib" / "helpers.py").unlink()
    (workspace / "kernel.py").write_text("# mine\n")
    (workspace / "notes.md").write_text("added\n")
    report = ws.check_and_restore(task, workspace, before)
    assert not report.ok
    assert report.restored_files == ("lib/helpers.py", "reference.py")
    assert report.changed_files == ("kernel.py",) and report.added_files == ("notes.md",)
    assert (workspace / "reference.py").read_bytes() == (task.root / "reference.py").read_bytes()
    assert (workspace / "lib" / "helpers.py").read_text() == "HELPER = 'task'\n"
    assert (workspace / "kernel.py").read_text() == "# mine\n"


def test_sparse_files_of_terabytes_are_never_read(task: Task, tmp_path: Path) -> None:
    # A confined agent makes them in no disk blocks; hashing their apparent size never ended.
    workspace, before = prepared(task, tmp_path)
    for name in ("notes.bin", "reference.py", "kernel.py"):
        with open(workspace / name, "wb") as handle:
            handle.truncate(15 * 2**40)
    report = in_time(lambda: ws.check_and_restore(task, workspace, before), 20)
    assert report.restored_files == ("reference.py",) and report.changed_files == ("kernel.py",)
    assert report.added_files == ("notes.bin",)
    digests = in_time(lambda: ws.digests(workspace), 20)
    assert ":unread:" in digests["notes.bin"]


def test_folders_nested_past_pythons_recursion_are_removed_and_reject(task: Task,
                                                                      tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    deep = workspace
    for _ in range(1200):  # pathlib's rglob recursed once per level: RecursionError
        deep = deep / "d"
        deep.mkdir()
    (deep / "kernel.py").write_text("x = 1\n")
    report = ws.check_and_restore(task, workspace, before)
    assert not report.ok
    assert any(f"deeper than {ws.MAX_DEPTH} folders" in entry and "removed" in entry
               for entry in report.restored_files)
    assert ws.walk(workspace).complete  # what is left is within the caps: later steps walk it


def test_a_path_longer_than_the_cap_is_removed(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    folder = workspace
    for i in range(5):
        folder = folder / (f"{i}" * 250)
        folder.mkdir()
    report = ws.check_and_restore(task, workspace, before)
    assert not report.ok and "bytes: removed" in report.restored_files[-1]
    assert not (workspace / ("0" * 250) / ("1" * 250) / ("2" * 250) / ("3" * 250)
                / ("4" * 250)).exists()


def test_a_linked_folder_is_replaced_never_written_through(task: Task, tmp_path: Path) -> None:
    # The agent replaced lib/ by a link to a folder elsewhere (a stored solution, another
    # task's files): restoring lib/helpers.py used to delete and rewrite the file it reached.
    workspace, before = prepared(task, tmp_path)
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "helpers.py").write_text("VICTIM\n")
    (victim / "tuned.py").write_text("TUNED = 'read through the link'\n")
    shutil.rmtree(workspace / "lib")
    (workspace / "lib").symlink_to(victim)
    report = ws.check_and_restore(task, workspace, before)
    assert (victim / "helpers.py").read_text() == "VICTIM\n"
    assert sorted(p.name for p in victim.iterdir()) == ["helpers.py", "tuned.py"]
    assert not (workspace / "lib").is_symlink() and (workspace / "lib").is_dir()
    assert (workspace / "lib" / "helpers.py").read_text() == "HELPER = 'task'\n"
    assert not (workspace / "lib" / "tuned.py").exists()  # the editable file was never here
    assert not report.ok
    assert any(entry.startswith("lib (a link where the task has a folder")
               for entry in report.restored_files)
    assert "lib" not in report.added_files


def test_a_file_where_the_task_has_a_folder_is_replaced(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    shutil.rmtree(workspace / "lib")
    (workspace / "lib").write_text("not a folder\n")
    report = ws.check_and_restore(task, workspace, before)
    assert not report.ok and any(e.startswith("lib (a file where") for e in report.restored_files)
    assert (workspace / "lib" / "helpers.py").read_text() == "HELPER = 'task'\n"


def test_a_protected_file_replaced_by_a_fifo_or_a_folder_is_restored(task: Task,
                                                                     tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    (workspace / "reference.py").unlink()
    os.mkfifo(workspace / "reference.py")  # copying onto it raised (or blocked on open)
    (workspace / "inputs.py").unlink()
    (workspace / "inputs.py" / "deep").mkdir(parents=True)
    report = in_time(lambda: ws.check_and_restore(task, workspace, before), 20)
    assert report.restored_files == ("inputs.py", "reference.py")
    for name in ("inputs.py", "reference.py"):
        assert (workspace / name).read_bytes() == (task.root / name).read_bytes()


@pytest.mark.parametrize("swap", ["folder", "fifo_with_a_writer", "link", "grown"])
def test_a_file_swapped_after_the_walk_saw_it_is_a_changed_fingerprint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str) -> None:
    # The agent's processes may outlive it: a file the walk listed as regular can be something
    # else when it is hashed. A folder there raised IsADirectoryError out of the digests.
    root = tmp_path / "workspace"
    root.mkdir()
    target, held = root / "kernel.py", []
    target.write_text("x = 1\n")
    intact = ws.digests(root)
    real_walk = ws.walk

    def walk_then_swap(folder: Path, **kwargs: object) -> ws.Tree:
        tree = real_walk(folder, **kwargs)
        if swap == "grown":
            target.write_text("x = 1\ny = 2\n")
            return tree
        target.unlink()
        if swap == "folder":
            target.mkdir()
        elif swap == "link":
            (tmp_path / "other.py").write_text("x = 1\n")
            target.symlink_to(tmp_path / "other.py")
        else:
            os.mkfifo(target)
            held.append(os.open(target, os.O_RDONLY | os.O_NONBLOCK))
            held.append(os.open(target, os.O_WRONLY))
        return tree

    monkeypatch.setattr(ws, "walk", walk_then_swap)
    try:
        found = in_time(lambda: ws.digests(root), 20)
    finally:
        for fd in held:
            os.close(fd)
    assert found == {"kernel.py": "6:unreadable"} != intact


def test_an_editable_file_replaced_by_a_link_is_restored(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    (workspace / "kernel.py").unlink()
    (workspace / "kernel.py").symlink_to("/etc/hostname")
    report = ws.check_and_restore(task, workspace, before)
    assert report.restored_files == ("kernel.py",) and not (workspace / "kernel.py").is_symlink()


def test_names_that_are_not_utf8_are_listed(task: Task, tmp_path: Path) -> None:
    workspace, before = prepared(task, tmp_path)
    Path(os.fsdecode(os.fsencode(workspace) + b"/notes-\xff\xfe.txt")).write_text("x")
    report = ws.check_and_restore(task, workspace, before)
    assert report.ok and report.added_files == (os.fsdecode(b"notes-\xff\xfe.txt"),)


def test_more_entries_than_the_cap_reject_without_listing_them(task: Task, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setattr(ws, "MAX_ENTRIES", 50)
    workspace, before = prepared(task, tmp_path)
    for i in range(100):
        (workspace / f"f{i}").write_text("")
    report = ws.check_and_restore(task, workspace, before)
    assert not report.ok and "more than 50 files and folders" in report.restored_files[-1]


def test_remove_tree_removes_any_depth_and_read_only_folders(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    deep = root
    for _ in range(1500):
        deep = deep / "d"
        deep.mkdir()
    (deep / "f").write_text("x")
    (root / "ro" / "inner").mkdir(parents=True)
    (root / "ro" / "inner" / "f").write_text("x")
    (root / "ro" / "inner").chmod(0o500)
    (root / "ro").chmod(0o500)
    (root / "link").symlink_to(tmp_path / "kept")
    (tmp_path / "kept").mkdir()
    started = time.monotonic()
    ws.remove_tree(root)
    assert not root.exists() and (tmp_path / "kept").is_dir()
    assert time.monotonic() - started < 20

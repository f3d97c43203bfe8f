"""The judge's watch on each side's disk use (``disk_watch``): what it counts, and that a side
over the limit is stopped. The whole path (a candidate filling its scratch folder, killed and
blamed as ``resources``) is the red team's ``fill_the_disk``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aka_core.evaluation import disk_watch

MIB = 2**20


def write(path: Path, mib: int) -> None:
    path.write_bytes(os.urandom(MIB) * mib)


def test_the_limit_comes_from_the_environment() -> None:
    assert disk_watch.limit_bytes({}) == disk_watch.DEFAULT_LIMIT == 8 * 2**30
    assert disk_watch.limit_bytes({"AKA_SCRATCH_LIMIT": "64M"}) == 64 * MIB
    assert disk_watch.limit_bytes({"AKA_SCRATCH_LIMIT": "1.5g"}) == 3 * 2**29
    assert disk_watch.limit_bytes({"AKA_SCRATCH_LIMIT": "4096"}) == 4096
    for bad in ("lots", "-1G", "0"):
        with pytest.raises(ValueError, match="AKA_SCRATCH_LIMIT"):
            disk_watch.limit_bytes({"AKA_SCRATCH_LIMIT": bad})


def test_files_count_once_by_their_blocks(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    write(tmp_path / "a" / "b" / "data", 3)
    os.link(tmp_path / "a" / "b" / "data", tmp_path / "a" / "link")  # the same blocks
    (tmp_path / "a" / "sym").symlink_to("/usr")  # not followed
    with open(tmp_path / "sparse", "wb") as sparse:  # a 1 GiB hole fills nothing
        sparse.truncate(2**30)
    used, entries, hidden = disk_watch.usage([tmp_path], [])
    assert 3 * MIB <= used < 3 * MIB + 64 * 1024
    assert entries == 6 and hidden == 0


def test_a_deleted_file_kept_open_counts(tmp_path: Path) -> None:
    # What no folder shows still fills the disk: found through the process's open files.
    child = subprocess.Popen([sys.executable, "-c", (
        "import os, sys\n"
        f"f = open({str(tmp_path / 'gone')!r}, 'wb'); f.write(os.urandom(1 << 20) * 5); "
        "f.flush(); os.unlink(f.name)\n"
        "print('ready', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        used, _, hidden = disk_watch.usage([tmp_path], [child.pid])
        assert hidden == used and 5 * MIB <= hidden < 5 * MIB + 64 * 1024
        assert disk_watch.usage([tmp_path], [])[0] == 0  # the folder alone shows nothing
    finally:
        child.kill()
        child.wait()


def test_a_deleted_file_kept_mapped_counts(tmp_path: Path) -> None:
    # Mapped (one page), deleted and closed: its blocks stay allocated, with no descriptor left.
    child = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, os, sys\n"  # libc's mmap: Python's keeps a duplicate descriptor
        "libc = ctypes.CDLL(None); libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, "
        "ctypes.c_int, ctypes.c_long]\n"
        f"f = open({str(tmp_path / 'gone')!r}, 'w+b'); f.write(os.urandom(1 << 20) * 5); "
        "f.flush(); os.fsync(f.fileno())\n"
        "assert libc.mmap(None, 4096, 1, 1, f.fileno(), 0) not in (None, 2**64 - 1)\n"
        "os.unlink(f.name); f.close()\n"
        "print('ready', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert not any("gone" in os.readlink(f"/proc/{child.pid}/fd/{fd}")
                       for fd in os.listdir(f"/proc/{child.pid}/fd/"))
        used, _, hidden = disk_watch.usage([tmp_path], [child.pid])
        try:
            os.listdir(f"/proc/{child.pid}/map_files")
            assert hidden == used and 5 * MIB <= hidden < 5 * MIB + 64 * 1024
        except PermissionError:  # no CAP_SYS_ADMIN: the mapped extent, the least it holds
            assert hidden == used >= 4096
    finally:
        child.kill()
        child.wait()


def test_the_walk_stops_at_its_entry_limit(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"f{i}").touch()
    assert disk_watch.usage([tmp_path], [], max_entries=10)[1] == 11


def test_a_side_over_the_limit_is_reported_once_with_its_size(tmp_path: Path) -> None:
    reports: list[str] = []
    watch = disk_watch.DiskWatch(limit=4 * MIB, period=3600)
    watch.watch("candidate", [tmp_path], roots=list, over=reports.append)
    write(tmp_path / "small", 1)
    watch.check()
    assert reports == []
    write(tmp_path / "big", 4)
    watch.check()
    watch.check()
    assert len(reports) == 1 and "5.0 MiB of disk" in reports[0] and "4.0 MiB" in reports[0]
    summary = watch.stop()
    assert summary["limit_bytes"] == 4 * MIB and summary["peak_bytes"]["candidate"] >= 5 * MIB


def test_too_many_files_are_over_the_limit_too(tmp_path: Path) -> None:
    reports: list[str] = []
    watch = disk_watch.DiskWatch(limit=2**40, period=3600, max_entries=20)
    watch.watch("candidate", [tmp_path], roots=list, over=reports.append)
    for i in range(30):
        (tmp_path / f"f{i}").touch()
    watch.check()
    assert reports and "more than 20 files" in reports[0]


def test_the_thread_stops_a_writer(tmp_path: Path) -> None:
    # A process writing without end: the watch's thread reports it within a few periods.
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, time\n"
        "chunk = os.urandom(1 << 20)\n"
        f"for i in range(200):\n    open(os.path.join({str(tmp_path)!r}, str(i)), 'wb').write(chunk)"
        "\n    time.sleep(0.01)")])
    reports: list[str] = []

    def over(message: str) -> None:
        reports.append(message)
        writer.kill()

    watch = disk_watch.DiskWatch(limit=16 * MIB, period=0.05)
    watch.watch("candidate", [tmp_path], roots=lambda: [writer.pid], over=over)
    writer.wait(timeout=60)
    watch.stop()
    assert reports, "the writer finished unreported"
    assert len(list(tmp_path.iterdir())) < 200


def test_freed_space_elsewhere_hides_growth_for_one_walk_period_at_most(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A colluder that deletes what it wrote raises the free space as fast as this side fills
    # it: the free-space test sees nothing, the periodic walk still does.
    reports: list[str] = []
    watch = disk_watch.DiskWatch(limit=4 * MIB, period=3600)
    watch.watch("candidate", [tmp_path], roots=list, over=reports.append)
    watch.check()
    write(tmp_path / "big", 8)
    monkeypatch.setattr(disk_watch, "_free", lambda folders: (2**40, 2**30))  # never falls
    watch.check()
    assert reports == []  # within the period: only the free space was read
    monkeypatch.setattr(disk_watch, "WALK_EVERY_S", 0.0)
    watch.check()
    assert len(reports) == 1


def test_no_walk_while_the_free_space_holds(tmp_path: Path) -> None:
    # The judge's thread walks nothing while no side could have grown past the limit.
    watch = disk_watch.DiskWatch(limit=2**30, period=3600)
    watch.watch("candidate", [tmp_path], roots=list, over=lambda message: None)
    write(tmp_path / "small", 1)
    for _ in range(5):
        watch.check()
    assert watch.stop()["walks"] == 1

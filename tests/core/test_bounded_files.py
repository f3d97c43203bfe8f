"""The one reader of files someone else made (``aka_core.bounded_files``): a file over its cap, a
FIFO, a link, a device, a folder, and a file that changes between the ``stat`` that sized it and
the read are each refused, at once and without a descriptor left open."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aka_core import bounded_files
from aka_core.bounded_files import (
    FileChanged,
    FileTooLarge,
    NotRegularFile,
    read_at_most,
    read_exactly,
    sha256_exactly,
)

MiB = 1 << 20
READERS: dict[str, Callable[[Path, int], Any]] = {
    "read_at_most": read_at_most, "read_exactly": read_exactly, "sha256_exactly": sha256_exactly}


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_descriptor_left() -> Any:
    before = _open_descriptors()
    yield
    assert _open_descriptors() == before, "a refused file's descriptor was left open"


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'{"time_ms": 1.5}')
    assert read_at_most(path, 16) == b'{"time_ms": 1.5}'
    assert read_at_most(path, MiB) == b'{"time_ms": 1.5}'
    assert read_exactly(path, 16) == b'{"time_ms": 1.5}'
    assert sha256_exactly(path, 16) == hashlib.sha256(b'{"time_ms": 1.5}').hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert (read_at_most(empty, 0), read_exactly(empty, 0)) == (b"", b"")
    assert sha256_exactly(empty, 0) == hashlib.sha256(b"").hexdigest()


def test_a_file_over_the_cap_is_refused(tmp_path: Path, no_descriptor_left: None) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"x" * MiB)
    assert len(read_at_most(path, MiB)) == MiB  # the cap itself is allowed
    path.write_bytes(b"x" * (MiB + 1))
    with pytest.raises(FileTooLarge, match=r"^larger than 1 MiB$") as refused:
        read_at_most(path, MiB)
    assert (refused.value.path, refused.value.limit) == (path, MiB)
    with pytest.raises(FileTooLarge, match=r"^larger than 10 bytes$"):
        read_at_most(path, 10)
    assert isinstance(refused.value, ValueError)  # what the callers catch


def test_a_sparse_file_of_terabytes_is_refused_by_its_size(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # It costs its maker nothing; its size refuses it before any content is read.
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as handle:
        handle.truncate(8 * 2**40)
    real_fdopen = os.fdopen
    reads: list[int] = []

    def counting_fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        handle = real_fdopen(fd, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: reads.append(n) or real_read(n)  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(bounded_files.os, "fdopen", counting_fdopen)
    with pytest.raises(FileTooLarge):
        read_at_most(path, 16 * MiB)
    assert reads == []


def _finishes(call: Callable[[], Any], fifo: Path) -> BaseException | None:
    """What ``call`` raised (None: it returned), failing the test if it is still waiting after
    5 s; a reader stuck opening the FIFO is then let go by opening its other end."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(writer)
        thread.join(5)
        pytest.fail("reading a FIFO waited for a writer")
    return outcome[0]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("writer", [False, True], ids=["no_writer", "writer_holding_it"])
def test_a_fifo_is_refused_without_waiting(tmp_path: Path, reader: str, writer: bool,
                                           no_descriptor_left: None) -> None:
    # A FIFO the side made in place of its report hung the judge: opened at once, never read.
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    held: list[int] = []
    if writer:  # a writer that never writes: a blocking read would wait for it forever
        held.append(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        held.append(os.open(fifo, os.O_WRONLY))
    try:
        raised = _finishes(lambda: READERS[reader](fifo, 0), fifo)
    finally:
        for fd in held:
            os.close(fd)
    assert isinstance(raised, NotRegularFile) and str(raised) == "not a regular file"


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("target", ["file", "dev_zero"])
def test_a_link_is_not_followed(tmp_path: Path, reader: str, target: str,
                                no_descriptor_left: None) -> None:
    # A link would read what it points at: a held-out draw, or /dev/zero into the reader's memory.
    secret = tmp_path / "held_out.json"
    secret.write_bytes(b'{"M": 7001}')
    link = tmp_path / "report.json"
    link.symlink_to(secret if target == "file" else Path("/dev/zero"))
    with pytest.raises(OSError) as refused:
        READERS[reader](link, secret.stat().st_size)
    assert refused.value.errno == errno.ELOOP


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_folder_or_a_device_is_refused_unread(tmp_path: Path, reader: str,
                                                no_descriptor_left: None) -> None:
    folder = tmp_path / "report.json"
    folder.mkdir()
    with pytest.raises(NotRegularFile):
        READERS[reader](folder, folder.stat().st_size)
    with pytest.raises(NotRegularFile):
        READERS[reader](Path("/dev/zero"), 0)


@pytest.mark.parametrize("reader", ["read_exactly", "sha256_exactly"])
def test_a_file_another_size_than_its_stat_said_is_refused(tmp_path: Path, reader: str,
                                                          no_descriptor_left: None) -> None:
    # The caller sized it (lstat) and it changed before it was opened: grown or shrunk.
    path = tmp_path / "kernel.py"
    path.write_bytes(b"x = 1\n")
    size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b"y = 2\n")
    with pytest.raises(FileChanged, match="changed while it was read"):
        READERS[reader](path, size)
    with pytest.raises(FileChanged):
        READERS[reader](path, 2 * size + 1)


def _growing_after_fstat(monkeypatch: pytest.MonkeyPatch, path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` right after the reader's ``fstat`` of it: the file grows
    between the stat that sized it and the read."""
    real_fstat = os.fstat

    def fstat_then_grow(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        if os.readlink(f"/proc/self/fd/{fd}") == str(path):
            with path.open("ab") as handle:
                handle.write(data)
        return info

    monkeypatch.setattr(bounded_files.os, "fstat", fstat_then_grow)


@pytest.mark.parametrize("reader", ["read_exactly", "sha256_exactly"])
def test_a_file_that_grows_between_stat_and_read_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str,
        no_descriptor_left: None) -> None:
    path = tmp_path / "kernel.py"
    path.write_bytes(b"x = 1\n")
    _growing_after_fstat(monkeypatch, path, b"import os\n")
    with pytest.raises(FileChanged):
        READERS[reader](path, 6)


def test_a_report_that_grows_past_its_cap_while_read_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_descriptor_left: None) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"x" * (MiB - 2))  # under the cap when its size is read
    _growing_after_fstat(monkeypatch, path, b"x" * MiB)
    with pytest.raises(FileTooLarge):
        read_at_most(path, MiB)


def test_a_file_that_shrinks_while_hashed_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernel.py"
    path.write_bytes(b"x" * 100)
    real_fstat = os.fstat

    def fstat_then_shrink(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        os.truncate(path, 10)
        return info

    monkeypatch.setattr(bounded_files.os, "fstat", fstat_then_shrink)
    with pytest.raises(FileChanged):
        sha256_exactly(path, 100)
    path.write_bytes(b"x" * 100)
    with pytest.raises(FileChanged):
        read_exactly(path, 100)


def test_a_large_file_is_hashed_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(bounded_files, "CHUNK_BYTES", 7)
    data = bytes(range(256)) * 3
    path = tmp_path / "kernel.so"
    path.write_bytes(data)
    assert sha256_exactly(path, len(data)) == hashlib.sha256(data).hexdigest()

"""Reading a file someone else controls: only a regular file, never through a link, never waited
on, never more than the reader allows.

aka reads files that an agent or a candidate wrote (a workspace it hashes or sends, a side's
folder it keys a cache by, a performance report a task's commands wrote). Reading one the
ordinary way lets its author choose what happens: a link sends the reader elsewhere (a held-out
draw, ``/dev/zero``), a FIFO blocks it forever, a device or a sparse file of terabytes fills its
memory, and a file that changes between the ``stat`` that sized it and the read hands it more
than it sized. The core's bounded reads of such files share this module, so the checks are
made once and alike:

- ``os.open`` with ``O_NOFOLLOW`` (a final link is refused, ``ELOOP``), ``O_NONBLOCK`` (opening
  a FIFO returns at once) and ``O_CLOEXEC``;
- ``fstat`` of what was opened, not of the path: anything but a regular file (FIFO, socket,
  device, folder) is ``NotRegularFile``, unread;
- a read of at most one byte past what the caller allows, so that a file larger than that, or
  one that grew while it was read, is told apart from one that fits without reading the rest.

The callers decide what a refusal means to them (an error naming the file, a cold cache, a
fingerprint that differs): these functions only raise. ``OSError`` is what the system said
(a link, a missing file, a denied read); ``RefusedFile`` (a ``ValueError``) is what was found.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CHUNK_BYTES = 1 << 20
"""What ``sha256_exactly`` reads at a time: a large file is hashed without being held whole."""

StrPath = str | os.PathLike[str]

MAX_NAME_BYTES = 255
"""The longest name of one file or folder that file systems hold (``NAME_MAX``)."""
MAX_PATH_BYTES = 1024
"""The longest relative path aka takes from someone else (a task, a workspace, a request):
absolute paths built on it stay well under ``PATH_MAX``, so no later step fails on one."""


class RefusedFile(ValueError):
    """The file is not one the reader accepts; ``path`` names it."""

    def __init__(self, path: StrPath, message: str):
        super().__init__(message)
        self.path = path


class NotRegularFile(RefusedFile):
    """What the path names is a FIFO, socket, device or folder (it was not read)."""

    def __init__(self, path: StrPath):
        super().__init__(path, "not a regular file")


class FileTooLarge(RefusedFile):
    """The file holds more than ``limit`` bytes (at most ``limit + 1`` of them were read)."""

    def __init__(self, path: StrPath, limit: int):
        super().__init__(path, f"larger than {_amount(limit)}")
        self.limit = limit


class FileChanged(RefusedFile):
    """The file is not the size its reader was told (it changed since that ``stat``, or while it
    was read)."""

    def __init__(self, path: StrPath):
        super().__init__(path, f"{os.fspath(path)} changed while it was read")


def _amount(size: int) -> str:
    return f"{size >> 20} MiB" if size and size % (1 << 20) == 0 else f"{size} bytes"


@contextlib.contextmanager
def open_regular(path: StrPath) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The regular file at ``path``, opened for reading without following a link or waiting on a
    FIFO, with the ``fstat`` of what was opened. ``OSError`` where it cannot be opened (a final
    link is ``ELOOP``), ``NotRegularFile`` where it is anything but a regular file."""
    fd = os.open(path, OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(path)
        # Until the handle owns the descriptor, a refusal or a failure closes it here (a
        # failing fdopen leaves open a descriptor it was given).
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle, info


def read_at_most(path: StrPath, limit: int) -> bytes:
    """The content of the regular file at ``path``, of at most ``limit`` bytes: ``FileTooLarge``
    when it holds more (its size says so before any content is read, and a file that grows while
    it is read is stopped one byte past ``limit``)."""
    with open_regular(path) as (handle, info):
        if info.st_size > limit:
            raise FileTooLarge(path, limit)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit)
    return data


def read_exactly(path: StrPath, size: int) -> bytes:
    """The content of the regular file at ``path``, which must hold exactly ``size`` bytes (the
    size an earlier ``lstat`` gave): ``FileChanged`` when it is now another size or changes size
    while it is read. Never reads more than ``size + 1`` bytes."""
    with open_regular(path) as (handle, info):
        if info.st_size != size:
            raise FileChanged(path)
        data = handle.read(size + 1)
    if len(data) != size:
        raise FileChanged(path)
    return data


def sha256_exactly(path: StrPath, size: int) -> str:
    """The sha256 (hex) of the regular file at ``path``, which must hold exactly ``size`` bytes, as
    ``read_exactly`` reads it, but ``CHUNK_BYTES`` at a time (the file is never held whole)."""
    h = hashlib.sha256()
    with open_regular(path) as (handle, info):
        if info.st_size != size:
            raise FileChanged(path)
        left = size
        while left:
            chunk = handle.read(min(CHUNK_BYTES, left))
            if not chunk:  # it shrank
                raise FileChanged(path)
            h.update(chunk)
            left -= len(chunk)
        if handle.read(1):  # it grew
            raise FileChanged(path)
    return h.hexdigest()

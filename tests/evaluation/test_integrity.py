"""The evaluator's digests: a file's digest is reused only while nothing could have written it
(its inode, size, mtime and a ctime no one but root can set back), so a change is seen even where
the writer restores the size and the mtime."""

from __future__ import annotations

import importlib.metadata
import os
import time
from pathlib import Path

import pytest

from aka_core.evaluation import integrity


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(integrity, "SETTLED_SECONDS", -1.0)  # digests reused at once
    monkeypatch.setattr(integrity, "_DIGESTS", {})


def test_a_rewrite_that_keeps_size_and_mtime_is_seen(tmp_path: Path, settled: None) -> None:
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    before = integrity.snapshot([hook])
    st = os.stat(hook)
    time.sleep(0.05)
    hook.write_text("EVIL = 1\n")  # same size
    os.utime(hook, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime moves on
    assert integrity.changes(before, integrity.snapshot([hook])) == [str(hook)]


def test_a_file_replaced_by_a_rename_is_seen(tmp_path: Path, settled: None) -> None:
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    before = integrity.snapshot([hook])
    other = tmp_path / "other.py"
    other.write_text("EVIL = 1\n")
    os.replace(other, hook)
    assert integrity.changes(before, integrity.snapshot([hook])) == [str(hook)]


def test_a_file_written_just_now_is_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    monkeypatch.setattr(integrity, "_DIGESTS", {})
    hook = tmp_path / "judge.py"
    hook.write_text("GOOD = 1\n")
    integrity.snapshot([hook])
    assert str(hook) not in integrity._DIGESTS  # its ctime is within the clock's resolution


def test_the_aka_distributions_are_the_ones_importlib_lists() -> None:
    slow = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").lower().startswith("aka-")}
    fast = {d.metadata["Name"].lower() for d in integrity.aka_distributions()}
    assert fast == slow and "aka-core" in fast

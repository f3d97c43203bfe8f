"""The records of this host's reward services' state folders (``state_registry``), which the
agents of ``aka run`` are kept out of."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aka_core.service import state_registry


def test_recorded_state_folders_are_found_and_gone_ones_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir(), gone.mkdir()
    for state in (kept, gone, kept):  # recorded twice: one record
        state_registry.record(state)
    assert set(state_registry.recorded()) == {kept.resolve(), gone.resolve()}
    gone.rmdir()
    assert state_registry.recorded() == (kept.resolve(),)
    assert len(list(state_registry.records_folder().iterdir())) == 1  # its record went too


def test_a_record_that_would_hide_the_agents_tools_or_is_not_a_path_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    state_registry.record(Path(sys.prefix).parent)  # holds the Python that runs aka
    folder = state_registry.records_folder()
    (folder / "relative").write_text("some/where\n")
    (folder / "large").write_text("/" + "x" * 5000)
    (folder / "a-folder").mkdir()
    assert state_registry.recorded() == ()


def test_without_a_writable_home_nothing_is_recorded_and_nothing_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(blocker))  # a home that is a file: no folder below it
    state_registry.record(tmp_path)
    assert state_registry.recorded() == ()

"""What an agent launch may see, planned without starting anything (no bwrap needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aka_core.evaluation import integrity
from aka_core.kits import agent_sandbox
from aka_core.schema_validation import schemas_directory


def test_aka_s_own_files_come_back_when_the_checkout_lies_in_a_hidden_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A checkout under $HOME or /tmp (both hidden from agents): the editable packages and the
    # repository's schemas/ (which `aka selfcheck` validates with) must come back read-only.
    checkout = tmp_path / "home" / "aka"
    package = checkout / "aka_core"
    schemas = checkout / "schemas"
    package.mkdir(parents=True)
    schemas.mkdir()
    monkeypatch.setattr(integrity, "package_folders", lambda: [package])
    monkeypatch.setattr("aka_core.schema_validation.schemas_directory", lambda: schemas)
    workspace, home = tmp_path / "run" / "workspace", tmp_path / "run" / "home"
    workspace.mkdir(parents=True)
    home.mkdir()
    planned = agent_sandbox.plan(workspace=workspace, private_home=home,
                                 protected=[tmp_path / "home"])
    assert str(tmp_path / "home") in planned.hidden
    assert str(package) in planned.read_only and str(schemas) in planned.read_only
    assert str(checkout) not in planned.read_only  # the rest of the checkout stays hidden


def test_the_real_schemas_folder_is_one_aka_reads() -> None:
    assert (schemas_directory() / "task.schema.json").is_file()

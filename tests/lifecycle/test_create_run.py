"""``create_run`` reads the run config once, and ``run.yaml`` has one reader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aka_core.errors import AkaError
from aka_core.plugin.host import PluginHost
from aka_core.run.execute import create_run
from aka_core.run.results import load_run, read_run_file
from aka_core.yamlio import dump_yaml


def test_the_config_file_is_read_once(
    make_task: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_task("demo/scale_add")
    config = tmp_path / "config.yaml"
    config.write_text(dump_yaml({"agent": {"template": "noop"}, "tasks": ["demo"],
                                 "target_gpu_model": "cpu"}), encoding="utf-8")
    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counted(self: Path) -> bytes:
        if self.name == config.name:
            reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    run_dir = create_run(config, PluginHost(), output_root=tmp_path / "out")
    assert len(reads) == 1
    assert read_run_file(run_dir)["task_ids"] == ["demo/scale_add"]
    assert load_run(run_dir).run_yaml == read_run_file(run_dir)


def test_a_folder_that_is_not_a_run_is_named(tmp_path: Path) -> None:
    with pytest.raises(AkaError, match=r"not an aka run directory: no run\.yaml") as excinfo:
        read_run_file(tmp_path)
    assert excinfo.value.exit_code == 2
    with pytest.raises(AkaError, match="run directory not found"):
        read_run_file(tmp_path / "missing")

"""Each plugin distribution installs alone on top of aka-core (no other plugin present) and
`aka plugins` then lists what it registers, from that distribution, with no load error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (REPO / "plugins").glob("aka-*") if (p / "pyproject.toml").is_file())


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "-w", out, REPO, *PLUGINS)
    return out


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Path:
    """A venv with aka-core and its dependencies only (no system site-packages)."""
    root = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", root)
    python = root / "bin" / "python"
    (core,) = wheels.glob("aka_core-*.whl")
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", core)
    return python


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_plugin_installs_alone_and_is_listed(plugin: Path, core_venv: Path, wheels: Path) -> None:
    dist = plugin.name
    (wheel,) = wheels.glob(dist.replace("-", "_") + "-*.whl")
    run(core_venv, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel)
    try:
        out = run(core_venv, "-m", "aka_core.cli", "plugins", "--json").stdout
        data = json.loads(out)
        mine = [p for p in data["plugins"] if p["distribution"] == dist]
        assert mine, f"{dist} registered nothing: {data}"
        assert not data["load_errors"], data["load_errors"]
        others = {p["distribution"] for p in data["plugins"]} - {dist, "aka-core (builtin)"}
        assert not others, f"other plugins are present: {others}"
    finally:
        run(core_venv, "-m", "pip", "uninstall", "--quiet", "--yes", dist)

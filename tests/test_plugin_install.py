"""A plugin installed for real (pip, into a fresh venv) is discovered by ``aka plugins --json``;
a broken plugin is reported with its distribution and version while the others still load.

Each check runs twice: through the CLI (``python -m aka_core.cli plugins --json``) and through
``PluginHost().describe()`` directly, whose JSON the CLI prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BROKEN_DIST, BROKEN_VERSION, BROKEN_ENTRY_POINT = "aka-broken-demo", "0.0.1", "broken-demo"

DESCRIBE = (
    "import json, sys, structlog; "
    "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr)); "
    "from aka_core.plugin.host import PluginHost; print(json.dumps(PluginHost().describe()))"
)


def pip_install(python: Path, project: Path) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-build-isolation", "--no-index", str(project)],
        check=True, capture_output=True, text=True,
    )


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees aka-core through system site-packages, with aka-scorer-speedup installed."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root)],
                   check=True, capture_output=True)
    python = root / "bin" / "python"
    # When the tests themselves run in a virtual environment, "system" is the interpreter that
    # environment was made from, not the environment: show the new venv the packages of the one
    # running the tests (aka-core, hatchling for the build) after its own, their .pth files
    # (editable installs) included.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    outer = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "_aka_outer_environment.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in sorted(outer)) + "\n")
    pip_install(python, REPO / "plugins" / "aka-scorer-speedup")
    return python


@pytest.fixture(scope="module")
def broken_venv_python(venv_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same venv plus a distribution whose entry point raises ImportError when loaded."""
    project = tmp_path_factory.mktemp("broken")
    (project / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "{BROKEN_DIST}"
        version = "{BROKEN_VERSION}"

        [project.entry-points.aka]
        {BROKEN_ENTRY_POINT} = "aka_broken_demo"

        [tool.hatch.build.targets.wheel]
        packages = ["aka_broken_demo"]
        """))
    (project / "aka_broken_demo").mkdir()
    (project / "aka_broken_demo" / "__init__.py").write_text(
        'raise ImportError("aka_broken_demo is broken on purpose")\n'
    )
    pip_install(venv_python, project)
    return venv_python


def run_plugins(python: Path, via: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = ["-m", "aka_core.cli", "plugins", "--json"] if via == "cli" else ["-c", DESCRIBE]
    environ = {k: v for k, v in os.environ.items()
               if k not in {"AKA_STRICT_PLUGINS", "AKA_DISABLE_PLUGINS"}}
    return subprocess.run([str(python), *command], capture_output=True, text=True,
                          env={**environ, **env}, cwd=REPO, timeout=120)


def described(python: Path, via: str, **env: str) -> dict[str, Any]:
    proc = run_plugins(python, via, **env)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def broken_errors(description: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in description["load_errors"] if e["distribution"] == BROKEN_DIST]


VIA = pytest.mark.parametrize("via", ["cli", "host"])


@VIA
def test_installed_scorer_is_listed(venv_python: Path, via: str) -> None:
    description = described(venv_python, via)
    speedup = [p for p in description["plugins"]
               if (p["kind"], p["name"]) == ("scorer", "speedup")]
    assert len(speedup) == 1, description["plugins"]
    assert speedup[0]["distribution"] == "aka-scorer-speedup"
    assert speedup[0]["version"] == "0.1.0"
    assert speedup[0]["builtin"] is False


def test_scorer_comes_from_the_venv_install(venv_python: Path) -> None:
    # Without PYTHONPATH (the tests may run from a checkout on it): it comes before any
    # environment's packages, the venv's install included.
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(venv_python), "-c", "import aka_scorer_speedup; print(aka_scorer_speedup.__file__)"],
        capture_output=True, text=True, check=True, env=environ,
    )
    assert Path(proc.stdout.strip()).is_relative_to(venv_python.parent.parent)


@VIA
def test_broken_plugin_is_reported_and_others_load(broken_venv_python: Path, via: str) -> None:
    description = described(broken_venv_python, via)
    names = {(p["kind"], p["name"]) for p in description["plugins"]}
    assert {("scorer", "speedup"), ("executor", "local")} <= names
    errors = broken_errors(description)
    assert len(errors) == 1, description["load_errors"]
    assert errors[0]["version"] == BROKEN_VERSION
    assert errors[0]["plugin"] == BROKEN_ENTRY_POINT
    assert "broken on purpose" in errors[0]["error"]


@VIA
def test_strict_mode_fails_naming_the_broken_plugin(broken_venv_python: Path, via: str) -> None:
    proc = run_plugins(broken_venv_python, via, AKA_STRICT_PLUGINS="1")
    assert proc.returncode != 0
    assert BROKEN_DIST in proc.stdout + proc.stderr


@VIA
def test_disabled_plugin_is_not_loaded(broken_venv_python: Path, via: str) -> None:
    description = described(broken_venv_python, via, AKA_DISABLE_PLUGINS=BROKEN_ENTRY_POINT)
    assert broken_errors(description) == []
    assert any(p["name"] == "speedup" for p in description["plugins"])

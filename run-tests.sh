#!/usr/bin/env bash
# Run the tests, after `ruff check .`.
#   ./run-tests.sh           the fast tier: everything not marked slow, on every core (under
#                            3 minutes on 2 cores; no docker, Slurm or cross-compilers needed)
#   ./run-tests.sh --all     every tier, one test at a time (what CI runs)
# Installs first (scripts/install.sh), unless nothing it installs from changed since the last
# install with this Python. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/python-env.sh  # PYTHON: $PYTHON, the active virtual environment, or ./.venv
# One worker more than cores: many tests wait on subprocesses and timeouts, not on a core.
# loadscope: a module's tests run on one worker, so a module's shared run is built once.
tier=(-m "not slow" -n "$(( $(nproc) + 1 ))" --dist loadscope)
if [ "${1:-}" = "--all" ]; then
  tier=()
  shift
fi
stamp=.install-stamp
wanted="$("$PYTHON" -c 'import sys; print(sys.executable)') $(cat pyproject.toml plugins/*/pyproject.toml scripts/install.sh scripts/dev-install.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || ! "$PYTHON" -c "import aka_core, xdist" 2>/dev/null; then
  PYTHON="$PYTHON" scripts/install.sh
  echo "$wanted" > "$stamp"
else
  echo "run-tests: nothing to install (unchanged since the last install; delete $stamp to force one)"
fi
"$PYTHON" -m ruff check .
"$PYTHON" -m pytest -q "${tier[@]}" "$@"

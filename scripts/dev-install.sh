#!/usr/bin/env bash
# Install aka-core (with its test extra) and every plugin under plugins/aka-*/ in editable mode,
# in one pip call, into the Python of scripts/python-env.sh. Extra arguments go to pip, for example:
#   scripts/dev-install.sh --no-build-isolation
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-env.sh  # PYTHON: $PYTHON, the active virtual environment, or ./.venv
python_bin="$PYTHON"
args=(-e ".[test]")
for plugin in plugins/aka-*/; do
  args+=(-e "./${plugin%/}")
done
"$python_bin" -m pip install "$@" "${args[@]}"

#!/usr/bin/env bash
# Install aka-core (with its test extra) and every plugin under plugins/aka-*/ in editable mode,
# in one pip call, into the current Python environment. Extra arguments go to pip, for example:
#   scripts/dev-install.sh --no-build-isolation
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin="${PYTHON:-python3}"
args=(-e ".[test]")
for plugin in plugins/aka-*/; do
  args+=(-e "./${plugin%/}")
done
"$python_bin" -m pip install "$@" "${args[@]}"

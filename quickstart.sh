#!/usr/bin/env bash
# Quick start: install aka if it is missing, then run the default config (no GPU, no agent
# credentials, no docker). Prints the run directory; look at its reports/report.txt.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/python-env.sh  # PYTHON: $PYTHON, the active virtual environment, or ./.venv
if ! "$PYTHON" -c 'import aka_core, triton' >/dev/null 2>&1; then
  scripts/install.sh
fi
exec "$PYTHON" -m aka_core.cli run configs/quickstart.yaml "$@"

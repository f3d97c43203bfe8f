#!/usr/bin/env bash
# Quick start: install aka if it is missing, then run the default config (no GPU, no agent
# credentials, no docker). Prints the run directory; look at its reports/report.txt.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v aka >/dev/null 2>&1 || ! python3 -c 'import aka_core, triton' >/dev/null 2>&1; then
  scripts/install.sh
fi
exec aka run configs/quickstart.yaml "$@"

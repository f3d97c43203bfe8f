#!/usr/bin/env bash
# Run the test suite (installs what it needs first). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install.sh
python3 -m ruff check .
python3 -m pytest -q "$@"

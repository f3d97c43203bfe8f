#!/usr/bin/env bash
# One digest of the sources the device wheels are built from (aka_core and every plugin's code
# and metadata), the same here and on the device machine's copy of the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
find aka_core plugins \( -name '*.py' -o -name 'pyproject.toml' -o -name '*.json' -o -name '*.cu' \) \
  -not -path '*/__pycache__/*' -not -path '*/tests/*' -print0 | LC_ALL=C sort -z \
  | xargs -0 sha256sum | sha256sum | cut -d' ' -f1

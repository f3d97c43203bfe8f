#!/usr/bin/env bash
# One digest of the sources the device wheels are built from (every file of aka_core and the
# plugins but their tests and caches), the same here and on the device machine's copy of the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
find aka_core plugins -type f -not -path '*/__pycache__/*' -not -path '*/tests/*' \
  -not -path '*.egg-info/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum \
  | cut -d' ' -f1

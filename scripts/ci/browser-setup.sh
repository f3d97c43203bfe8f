#!/usr/bin/env bash
# Chromium, in which the HTML report's test loads the page headless (plugins/aka-report-html).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends chromium
fi
chromium --version

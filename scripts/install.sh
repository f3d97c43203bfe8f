#!/usr/bin/env bash
# Install everything aka needs on a fresh machine without a GPU: PyTorch (CPU build), Triton (its
# interpreter runs Triton kernels on the CPU), FlyDSL, the core and every plugin (editable),
# pytest, ruff; into ./.venv unless a virtual environment is active or PYTHON names an interpreter
# (scripts/python-env.sh). Compilers for compile-only builds (nvcc, clang-19, lld) are system packages:
# scripts/ci/toolchains-setup.sh; tests that need a missing one skip and say so.
# On a GPU machine keep the PyTorch build that matches the GPU and skip the first step (AKA_KEEP_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python-env.sh  # PYTHON: $PYTHON, the active virtual environment, or ./.venv
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), "aka needs Python 3.11 or newer"'
echo "aka: installing into $("$PYTHON" -c 'import sys; print(sys.prefix)')" >&2
if [ -z "${AKA_KEEP_TORCH:-}" ]; then
  # Pinned: an unpinned `torch` pulls a multi-GB CUDA build.
  "$PYTHON" -m pip install -q torch==2.13.0 triton==3.6.0
fi
# Triton 3.6's CPU interpreter fails on numpy 2.4 (scalar conversion of 1-element arrays).
if ! "$PYTHON" -c "import numpy, sys; sys.exit(0 if tuple(map(int, numpy.__version__.split(\".\")[:2])) < (2, 4) else 1)" 2>/dev/null; then
  "$PYTHON" -m pip install -q "numpy>=1.26,<2.4"
fi
# FlyDSL (AMD's Python kernel DSL) for the flydsl backend: a self-contained wheel, no dependencies.
# Without ROCm its compile-only builds also need an ld.lld (scripts/ci/toolchains-setup.sh).
if ! "$PYTHON" -c "import flydsl" 2>/dev/null; then
  "$PYTHON" -m pip install -q flydsl==0.5.0
fi
PYTHON="$PYTHON" scripts/dev-install.sh -q ruff==0.17.6

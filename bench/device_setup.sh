#!/usr/bin/env bash
# Prepare a bare GPU machine (no internet) for the benchmarks of bench/: install the wheels of
# bench/build_device_wheels.sh under /opt/aka-site (runners may read /opt; /tmp is closed to them),
# and, when .whl-old/ holds an earlier engine's wheels, that engine under /opt/aka-old for
# bench/latency_compare.py. The machine's PyTorch ships without bytecode: compile it once, as a
# normal `pip install` would, or every Python process pays ~2.5 s compiling torch.
# Use:  source bench/device_setup.sh
set -eu
# Wheels built from other sources than this tree would measure other code than the one committed
# (it happened once: a whole GPU call on the code before the change it was meant to measure).
if [ -f .whl/COMMIT ]; then
  echo "device_setup: aka's wheels were built from commit $(cat .whl/COMMIT), not this tree"
elif [ "$(cat .whl/SOURCE 2>/dev/null)" != "$(bash bench/source_digest.sh)" ]; then
  echo "device_setup: .whl was not built from this tree: run bench/build_device_wheels.sh" >&2
  return 2 2>/dev/null || exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /opt/aka-site \
  .whl/*.whl
if compgen -G ".whl-old/aka_*.whl" >/dev/null; then
  mkdir -p /opt/aka-old
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /opt/aka-old \
    .whl-old/aka_*.whl $(ls .whl/*.whl | grep -v '/aka_')
fi
site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
python3 -m compileall -q -j 16 "$site/torch" "$site/triton" >/dev/null 2>&1 || true
export PYTHONPATH=/opt/aka-site PYTHONUNBUFFERED=1
set +eu

#!/usr/bin/env bash
# Build aka-core and every plugin as wheels into .whl/ (with the dependency wheels a GPU machine
# without internet lacks), so that one command there installs everything:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
# FROM=COMMIT builds aka's wheels from that commit instead of the working tree.
# OLD=COMMIT also builds that commit's aka wheels into .whl-old/ (an earlier engine to measure
# against on the same machine: bench/device_setup.sh installs it under /opt/aka-old).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
rm -f .whl/aka_*.whl .whl/COMMIT
if [ -n "${FROM:-}" ]; then
  # FROM=COMMIT: aka's wheels from that commit, not from the working tree (which may hold work
  # in progress); device_setup.sh then installs them and says which commit they are.
  src=$(mktemp -d /tmp/aka-from-XXXX)
  git worktree add -q --detach "$src" "$FROM"
  python3 -m pip wheel -q --no-deps -w .whl "$src" "$src"/plugins/aka-*/
  (cd "$src" && bash bench/source_digest.sh) > .whl/SOURCE
  git -C "$src" rev-parse HEAD > .whl/COMMIT
  git worktree remove --force "$src"
else
  python3 -m pip wheel -q --no-deps -w .whl . plugins/aka-*/
fi
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  cattrs==26.2.1 ruamel.yaml==0.19.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 \
  referencing==0.37.0 rpds-py==2026.9.1 structlog==26.1.0 attrs==26.1.0 typing_extensions \
  starlette uvicorn httpx anyio h11 httpcore sniffio idna certifi click \
  pytest iniconfig packaging pygments  # the sandbox's tests, run on the GPU machine's kernel
[ -n "${FROM:-}" ] || bash bench/source_digest.sh > .whl/SOURCE  # device_setup.sh refuses
# wheels older than the tree
if [ -n "${OLD:-}" ]; then
  old=$(mktemp -d /tmp/aka-old-XXXX)
  git worktree add -q --detach "$old" "$OLD"
  rm -rf .whl-old && mkdir -p .whl-old
  python3 -m pip wheel -q --no-deps -w .whl-old "$old" "$old"/plugins/aka-*/
  git worktree remove --force "$old"
  echo "$OLD" > .whl-old/COMMIT
  ls .whl-old
fi
ls .whl

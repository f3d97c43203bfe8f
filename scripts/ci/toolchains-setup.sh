#!/usr/bin/env bash
# The compilers the cuda, hip and flydsl backends build with on a machine without a GPU, so CI
# builds every CUDA, HIP and FlyDSL task for its architecture (compile-only):
#   - nvcc: the machine's CUDA toolkit, else NVIDIA's PyPI wheels unpacked into /opt/aka-cuda;
#   - clang-19, lld-19 and llvm-19 (llvm-nm) with Debian's HIP headers (libamdhip64-dev) for HIP,
#     and the ld.lld that FlyDSL links AMDGPU code objects with.
# FlyDSL itself is a Python package: scripts/install.sh installs it with the plugins.
# Also bubblewrap, which confines CLI agents (aka_core/kits/agent_sandbox.py).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg in clang-19 lld-19 llvm-19 libamdhip64-dev bubblewrap; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need[@]}"
fi
clang++-19 --version | head -1

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  (command -v nvcc || echo /usr/local/cuda/bin/nvcc)
else
  python3 -m pip install -q --no-deps --target /opt/aka-cuda \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 \
    nvidia-cuda-cccl==13.0.85 nvidia-nvvm==13.0.88
  home=/opt/aka-cuda/nvidia/cu13
  [ -e "$home/lib64" ] || ln -s lib "$home/lib64"
  ln -sf "$home/bin/nvcc" /usr/local/bin/nvcc
  echo "nvcc from PyPI: $home/bin/nvcc"
fi
nvcc --version | tail -1

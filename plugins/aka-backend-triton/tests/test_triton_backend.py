"""The Triton backend: interpreter on CPU, compile errors mapped to the candidate's file:line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from aka_core.plugin import BuildError
from aka_core.testing import BackendContract

triton = pytest.importorskip("triton")

from aka_backend_triton import TritonBackend, aka_register_backends, locate_compilation_error  # noqa: E402

BAD_KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def bad_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x + undefined_name
    tl.store(x_ptr + offs, y, mask=offs < n)
'''


class TestTritonContract(BackendContract):
    @pytest.fixture
    def record(self):
        return aka_register_backends()[0]


def test_interpreter_is_selected_for_cpu():
    backend = TritonBackend()
    assert backend.worker_environment("cpu") == {"TRITON_INTERPRET": "1"}
    assert backend.worker_environment("cuda") == {}



def test_preload_imports_triton_without_a_gpu():
    """What the runner preloads before the judge holds the GPU: Triton's modules, nothing run."""
    import subprocess
    import sys

    code = ("import sys; from aka_backend_triton import TritonBackend; "
            "assert 'triton' not in sys.modules; TritonBackend().preload('cpu'); "
            "assert 'triton.language' in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "TRITON_INTERPRET": "1"}, check=False)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_compile_error_points_at_the_candidate_line(tmp_path: Path):
    """Compile for an sm_90 target on the CPU (front end only) and map the error to file:line."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    (tmp_path / "kernel.py").write_text(BAD_KERNEL)
    backend = TritonBackend()
    module_fn = backend.load_callable(tmp_path, "kernel.py:bad_kernel", "aka_side_test_compile")
    source = ASTSource(fn=module_fn, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 128})
    with pytest.raises(Exception) as info:
        triton.compile(source, target=GPUTarget("cuda", 90, 32))
    file, line = locate_compilation_error(info.value, tmp_path)
    assert file == "kernel.py"
    assert line == 10, textwrap.dedent(BAD_KERNEL).splitlines()[line - 1]


def test_syntax_error_is_a_build_error(tmp_path: Path):
    (tmp_path / "kernel.py").write_text("import triton\n\ndef f(:\n    pass\n")
    with pytest.raises(BuildError) as info:
        TritonBackend().load_callable(tmp_path, "kernel.py:f", "aka_side_test_syntax")
    assert info.value.file == "kernel.py"
    assert info.value.line == 3


def test_kernels_compile_ahead_for_a_gpu_target_on_meta_tensors(tmp_path: Path):
    """A builder's mode (AKA_COMPILE_ONLY, AKA_TARGET_ARCH): preload makes Triton compile for the
    target and launch nothing; a call on meta tensors leaves an sm_90 cubin in the cache."""
    import json
    import os
    import subprocess
    import sys

    from aka_backend_triton import ahead

    assert ahead.target_of("sm_90") == ("cuda", 90, 32)
    assert ahead.target_of("sm_90a") == ("cuda", 90, 32)
    assert ahead.target_of("gfx942") is None
    (tmp_path / "k.py").write_text(textwrap.dedent('''
        import torch, triton, triton.language as tl

        @triton.jit
        def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        def double(x):
            y = torch.empty_like(x)
            _double[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
            return y
    '''))
    code = ("import sys, torch; sys.path.insert(0, sys.argv[1]); "
            "from aka_backend_triton import TritonBackend; TritonBackend().preload('cpu'); "
            "import k; print(k.double(torch.empty(4096, dtype=torch.float16, device='meta')).device)")
    env = {**os.environ, "AKA_COMPILE_ONLY": "1", "AKA_TARGET_ARCH": "sm_90",
           "TRITON_CACHE_DIR": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": ""}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, env=env, check=False)
    assert done.stdout.strip() == "meta", done.stderr[-3000:]
    cubins = list((tmp_path / "cache").rglob("*.cubin"))
    assert cubins
    described = next(p for p in cubins[0].parent.glob("*.json") if not p.name.startswith("__grp__"))
    assert json.loads(described.read_text())["target"]["arch"] == 90

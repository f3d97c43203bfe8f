"""The stored Triton solutions of the e2e tasks, run by Triton's CPU interpreter.

Each solution tree (tests/solutions/e2e/<task>/kernels/) is compared on small odd shapes with
the FP32 references of the kernel contract (kernels_api.REFERENCE). The interpreter checks
indexing, masks and the arithmetic, not speed or GPU-only behaviour.

TRITON_INTERPRET=1 must be set before triton is first imported (triton.language's own @jit
helpers are decorated then), and other tests of the same pytest process may already have
imported triton; so the checks run in one child process: this file run as a script prints
{check: null | traceback} as JSON, and each test reads its check's entry.
"""

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from aka_backend_e2e.kernels_api import BASELINE_TREE, REFERENCE, KernelSet, load_tree

try:
    import torch
except ImportError:  # torch is installed by the user, not a dependency of the plugin
    torch = None

SOLUTIONS = Path(__file__).resolve().parents[3] / "tests" / "solutions" / "e2e"
ATOL = RTOL = 2e-2
CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _tree(task: str) -> KernelSet:
    """The task's kernel tree as the engine would get it: the baseline tree with the
    solution's files in place of the baseline's (each solution file holds every entrypoint of
    its module), loaded by kernels_api.load_tree."""
    if task not in _trees:
        root = _workdir[0] / task / "kernels"
        shutil.copytree(BASELINE_TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (SOLUTIONS / task / "kernels").glob("*.py"):
            shutil.copy(path, root / path.name)
        _trees[task] = load_tree(root)
    return _trees[task]


_trees: dict[str, KernelSet] = {}
_workdir: list[Path] = []  # the child's temporary folder


def _bf16(*shape: int, gen) -> "torch.Tensor":
    return torch.randn(*shape, generator=gen).to(torch.bfloat16)


def _close(actual, expected) -> None:
    assert actual.dtype == torch.bfloat16
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual.float(), expected, atol=ATOL, rtol=RTOL)


# the checks (run in the child process) ---------------------------------------------------------

@check
def rms_norm_odd_shapes() -> None:
    norm = _tree("qwen3_norms")
    for rows, width in [(5, 33), (37, 16), (3, 64), (2, 200), (3, 1024)]:
        gen = torch.Generator().manual_seed(rows * 1000 + width)
        x = _bf16(rows, width, gen=gen)
        weight = (1.0 + 0.1 * torch.randn(width, generator=gen)).to(torch.bfloat16)
        _close(norm.rms_norm(x, weight, 1e-6), REFERENCE.rms_norm(x, weight, 1e-6))


@check
def rms_norm_of_strided_head_rows() -> None:
    """q/k norm: [T * heads, D] rows of a slice of a fused qkv projection."""
    norm = _tree("qwen3_norms")
    gen = torch.Generator().manual_seed(3)
    qkv = _bf16(7, 3 * 4 * 16, gen=gen)
    rows = qkv[:, : 4 * 16].view(7, 4, 16).reshape(-1, 16)
    weight = (1.0 + 0.1 * torch.randn(16, generator=gen)).to(torch.bfloat16)
    _close(norm.rms_norm(rows, weight, 1e-5), REFERENCE.rms_norm(rows, weight, 1e-5))


@check
def fused_add_rms_norm_odd_shapes() -> None:
    norm = _tree("qwen3_norms")
    for rows, width in [(5, 33), (9, 64), (1, 128), (2, 1024)]:
        gen = torch.Generator().manual_seed(rows * 7 + width)
        x, residual = _bf16(rows, width, gen=gen), _bf16(rows, width, gen=gen)
        weight = (1.0 + 0.1 * torch.randn(width, generator=gen)).to(torch.bfloat16)
        x_before, residual_before = x.clone(), residual.clone()
        normed, residual_out = norm.fused_add_rms_norm(x, residual, weight, 1e-6)
        normed_ref, residual_ref = REFERENCE.fused_add_rms_norm(x, residual, weight, 1e-6)
        _close(residual_out, residual_ref)
        _close(normed, normed_ref)
        assert torch.equal(x, x_before) and torch.equal(residual, residual_before)


@check
def silu_and_mul_odd_widths_and_strided_rows() -> None:
    activation = _tree("qwen3_silu_mul")
    for rows, width in [(5, 33), (1, 1030), (3, 2048), (2, 3072)]:
        gen = torch.Generator().manual_seed(rows * 31 + width)
        wide = _bf16(rows, 2 * width + 6, gen=gen)  # rows of a wider buffer: a row stride
        x = wide[:, 3: 3 + 2 * width]
        before = wide.clone()
        _close(activation.silu_and_mul(x), REFERENCE.silu_and_mul(x))
        assert torch.equal(wide, before), "silu_and_mul must not write its input"
    x = _bf16(2, 3, 2 * 40, gen=torch.Generator().manual_seed(1))  # leading dimensions kept
    _close(activation.silu_and_mul(x), REFERENCE.silu_and_mul(x))


def _cos_sin(max_len: int, dim: int, theta: float = 10000.0):
    """The NeoX table: cos of every position's angles, then their sin."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1)


@check
def rotary_of_strided_q_and_k() -> None:
    rotary = _tree("qwen3_rotary")
    for tokens, hq, hk, dim in [(5, 4, 2, 16), (3, 6, 2, 24), (1, 3, 1, 8), (2, 16, 8, 128)]:
        gen = torch.Generator().manual_seed(tokens + hq + dim)
        qkv = _bf16(tokens, (hq + 2 * hk) * dim, gen=gen)  # views, as the engine has them
        q = qkv[:, : hq * dim].view(tokens, hq, dim)
        k = qkv[:, hq * dim: (hq + hk) * dim].view(tokens, hk, dim)
        cos_sin = _cos_sin(41, dim)
        positions = torch.randint(0, 41, (tokens,), generator=gen, dtype=torch.int64)
        before = qkv.clone()
        q_out, k_out = rotary.rotary(q, k, positions, cos_sin)
        q_ref, k_ref = REFERENCE.rotary(q, k, positions, cos_sin)
        _close(q_out, q_ref)
        _close(k_out, k_ref)
        assert torch.equal(qkv, before), "rotary must not write its inputs"


@check
def attention_decode_masks_past_seq_lens() -> None:
    attention = _tree("qwen3_decode_attention")
    for hq, hk, dim, cache_len, lens in [(4, 2, 16, 37, [1, 20, 37]),
                                         (6, 2, 24, 70, [70, 65, 3, 64]),
                                         (2, 2, 16, 9, [5]),
                                         (16, 8, 128, 80, [67])]:  # qwen3-0.6b heads
        gen = torch.Generator().manual_seed(hq * 100 + cache_len)
        batch = len(lens)
        q = _bf16(batch, hq, dim, gen=gen)
        k_cache = _bf16(batch, cache_len, hk, dim, gen=gen)
        v_cache = _bf16(batch, cache_len, hk, dim, gen=gen)
        seq_lens = torch.tensor(lens, dtype=torch.int32)
        scale = 1.0 / math.sqrt(dim)
        expected = REFERENCE.attention_decode(q, k_cache, v_cache, seq_lens, scale)
        _close(attention.attention_decode(q, k_cache, v_cache, seq_lens, scale), expected)
        for i, n in enumerate(lens):  # what lies at and past seq_lens must not matter
            k_cache[i, n:] = 1e4
            v_cache[i, n:] = float("nan")
        _close(attention.attention_decode(q, k_cache, v_cache, seq_lens, scale), expected)


@check
def kv_write_from_strided_views() -> None:
    attention = _tree("qwen3_decode_attention")
    gen = torch.Generator().manual_seed(11)
    slots_n, cache_len, hk, dim, tokens = 3, 13, 3, 24, 5
    kv = _bf16(tokens, 3 * hk * dim, gen=gen)  # k and v as slices of a fused projection
    k = kv[:, hk * dim: 2 * hk * dim].view(tokens, hk, dim)
    v = kv[:, 2 * hk * dim:].view(tokens, hk, dim)
    k_cache = _bf16(slots_n, cache_len, hk, dim, gen=gen)
    v_cache = _bf16(slots_n, cache_len, hk, dim, gen=gen)
    slots = torch.tensor([2, 0, 2, 1, 0], dtype=torch.int64)
    positions = torch.tensor([0, 12, 7, 3, 4], dtype=torch.int64)
    k_expected, v_expected = k_cache.clone(), v_cache.clone()
    REFERENCE.kv_write(k, v, k_expected, v_expected, slots, positions)
    assert attention.kv_write(k, v, k_cache, v_cache, slots, positions) is None
    assert torch.equal(k_cache, k_expected) and torch.equal(v_cache, v_expected)


@check
def attention_prefill_causal_gqa() -> None:
    attention = _tree("qwen3_decode_attention")
    for tokens, hq, hk in [(7, 4, 2), (1, 2, 2)]:
        gen = torch.Generator().manual_seed(tokens)
        q, k, v = (_bf16(tokens, h, 16, gen=gen) for h in (hq, hk, hk))
        expected = REFERENCE.attention_prefill(q, k, v, 0.25)
        _close(attention.attention_prefill(q, k, v, 0.25), expected)


# the tests (pytest process) ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def results() -> dict[str, str | None]:
    if torch is None or importlib.util.find_spec("triton") is None:
        pytest.skip("needs torch and triton")
    if not SOLUTIONS.is_dir():
        pytest.skip("the stored solutions live in the repository checkout")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(CHECKS))
def test_solution_matches_fp32_reference(results: dict[str, str | None], name: str) -> None:
    error = results[name]
    if error is not None:
        pytest.fail(f"{name} failed under TRITON_INTERPRET=1:\n{error}", pytrace=False)


def _main() -> None:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported, by the solutions
    outcome: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(prefix="aka_e2e_solutions_") as tmp:
        _workdir.append(Path(tmp))
        for name, fn in CHECKS.items():
            try:
                fn()
                outcome[name] = None
            except Exception:
                outcome[name] = traceback.format_exc()
    print(json.dumps(outcome))


if __name__ == "__main__":
    _main()

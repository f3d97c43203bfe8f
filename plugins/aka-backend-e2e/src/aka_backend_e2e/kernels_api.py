"""The kernel contract every part of the e2e backend shares: the entrypoints of a kernel tree,
loading a tree, its digest, and FP32 references of every entrypoint.

A kernel tree is a folder with ``norm.py``, ``activation.py``, ``rotary.py`` and
``attention.py``. Tensors are on the engine's device; ``T`` tokens, ``H`` hidden, ``Hq``/``Hk``
heads, ``D`` head dim, ``S`` slots, ``L`` max sequence length. Every tensor argument is
contiguous. All functions are pure except ``kv_write`` (in place), and every one must be
capturable in a CUDA graph (no host syncs, no ``.item()``, static shapes)::

    norm.py       rms_norm(x[T,H] bf16, weight[H] bf16, eps: float) -> [T,H] bf16
                  fused_add_rms_norm(x[T,H], residual[T,H], weight[H], eps)
                      -> (normed[T,H], residual_out[T,H])   residual_out = x + residual
                  (the q/k norms call rms_norm on [T*heads, D])
    activation.py silu_and_mul(x[T,2I]) -> [T,I]             silu(x[:, :I]) * x[:, I:]
    rotary.py     rotary(q[T,Hq,D], k[T,Hk,D], positions[T] int64, cos_sin[Lmax,D] fp32)
                      -> (q_out, k_out)    NeoX: cos_sin[:, :D/2] = cos, [:, D/2:] = sin
    attention.py  attention_prefill(q[T,Hq,D], k[T,Hk,D], v[T,Hk,D], scale) -> [T,Hq,D]
                      causal, one sequence, GQA (Hq = g * Hk)
                  attention_decode(q[B,Hq,D], k_cache[B,L,Hk,D], v_cache[B,L,Hk,D],
                      seq_lens[B] int32, scale) -> [B,Hq,D]   attends to positions < seq_lens
                  kv_write(k[T,Hk,D], v[T,Hk,D], k_cache[S,L,Hk,D], v_cache[S,L,Hk,D],
                      slots[T] int64, positions[T] int64) -> None  cache[slots, positions] = k/v
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from aka_core.plugin import BuildError

if TYPE_CHECKING:
    import torch

ENTRYPOINTS: dict[str, str] = {
    "rms_norm": "norm.py",
    "fused_add_rms_norm": "norm.py",
    "silu_and_mul": "activation.py",
    "rotary": "rotary.py",
    "attention_prefill": "attention.py",
    "attention_decode": "attention.py",
    "kv_write": "attention.py",
}
"""Entrypoint -> the file of a kernel tree that defines it."""

IN_PLACE_OUTPUTS: dict[str, tuple[int, ...]] = {"kv_write": (2, 3)}
"""Entrypoints that return nothing: the positional arguments that are their outputs."""

BASELINE_TREE = Path(__file__).resolve().parent / "baseline_kernels"
"""The baseline kernel tree (plain PyTorch) that every builtin task copies as ``kernels/``."""


@attrs.frozen
class KernelSet:
    """One kernel tree's entrypoints, loaded."""

    rms_norm: Callable[..., Any]
    fused_add_rms_norm: Callable[..., Any]
    silu_and_mul: Callable[..., Any]
    rotary: Callable[..., Any]
    attention_prefill: Callable[..., Any]
    attention_decode: Callable[..., Any]
    kv_write: Callable[..., Any]
    root: Path | None = None
    digest: str | None = None

    def entrypoint(self, name: str) -> Callable[..., Any]:
        if name not in ENTRYPOINTS:
            raise KeyError(f"unknown entrypoint {name!r}; choose one of {', '.join(ENTRYPOINTS)}")
        return getattr(self, name)

    def recording(self, called: set[str]) -> KernelSet:
        """The same kernels, each adding its name to ``called`` when it is called (the proof
        that the engine ran the tree's entrypoints)."""
        def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(*args: Any, **kwargs: Any) -> Any:
                called.add(name)
                return fn(*args, **kwargs)
            recorded.__name__ = name
            recorded.__wrapped__ = fn  # type: ignore[attr-defined]
            return recorded

        return attrs.evolve(self, **{n: wrap(n, getattr(self, n)) for n in ENTRYPOINTS})


def tree_files(root: Path) -> list[Path]:
    """The files of a kernel tree that make its digest (no caches), sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".pyo"))


def tree_digest(root: Path) -> str:
    """``sha256:<hex>`` over every file's relative path and bytes."""
    root = Path(root)
    h = hashlib.sha256()
    for path in tree_files(root):
        data = path.read_bytes()
        h.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return "sha256:" + h.hexdigest()


_packages = itertools.count()


def load_tree(root: Path, package: str | None = None) -> KernelSet:
    """Import a kernel tree's modules as a private package of their own (so two trees never
    collide and relative imports between its files work); a ``BuildError`` naming the file
    and what is missing or broken otherwise."""
    from aka_core.plugin import PythonBackend

    root = Path(root).resolve()
    if not root.is_dir():
        raise BuildError(f"the kernel tree {root} is not a folder")
    digest = tree_digest(root)
    package = package or f"aka_e2e_kernels_{next(_packages)}_{digest[7:19]}"
    backend = PythonBackend()
    fns = {name: backend.load_callable(root, f"{file}:{name}", package)
           for name, file in ENTRYPOINTS.items()}
    return KernelSet(**fns, root=root, digest=digest)


def call_for_check(kernels: KernelSet, name: str, args: Sequence[Any],
                   kwargs: dict[str, Any] | None = None) -> list[torch.Tensor]:
    """Call one entrypoint as the operator oracle does: its returned tensors, or for an
    in-place entrypoint the arguments it writes."""
    import torch

    out = kernels.entrypoint(name)(*args, **(kwargs or {}))
    if name in IN_PLACE_OUTPUTS:
        return [args[i] for i in IN_PLACE_OUTPUTS[name]]
    tensors = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(
        out, list | tuple) else None
    if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"{name} returned {type(out).__name__}; expected tensors")
    return tensors


# --------------------------------------------------------------------------- FP32 references
# Inputs are upcast to float32 and every result is float32: the oracle's ground truth.


def ref_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    import torch

    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def ref_fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    r = x.float() + residual.float()
    return ref_rms_norm(r, weight, eps), r


def ref_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    xf = x.float()
    d = xf.shape[-1] // 2
    return F.silu(xf[..., :d]) * xf[..., d:]


def ref_rotary(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               cos_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    half = q.shape[-1] // 2
    table = cos_sin.float()[positions.long()]
    cos, sin = table[:, None, :half], table[:, None, half:]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.float()[..., :half], x.float()[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    return rotate(q), rotate(k)


def ref_attention_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          scale: float) -> torch.Tensor:
    import torch

    t, hq, _ = q.shape
    g = hq // k.shape[1]
    kf = k.float().repeat_interleave(g, dim=1)
    vf = v.float().repeat_interleave(g, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), kf) * scale
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    p = scores.masked_fill(future, float("-inf")).softmax(-1)
    return torch.einsum("hts,shd->thd", p, vf)


def ref_attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    import torch

    b, hq, d = q.shape
    length, hk = k_cache.shape[1], k_cache.shape[2]
    qg = q.float().view(b, hk, hq // hk, d)
    scores = torch.einsum("bkgd,blkd->bkgl", qg, k_cache.float()) * scale
    beyond = torch.arange(length, device=q.device)[None, :] >= seq_lens.long()[:, None]
    p = scores.masked_fill(beyond[:, None, None, :], float("-inf")).softmax(-1)
    # Positions beyond a sequence weigh exactly 0 (whatever the cache holds there).
    return torch.einsum("bkgl,blkd->bkgd", p, v_cache.float().masked_fill(
        beyond[:, :, None, None], 0.0)).reshape(b, hq, d)


def ref_kv_write(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 slots: torch.Tensor, positions: torch.Tensor) -> None:
    k_cache[slots.long(), positions.long()] = k.to(k_cache.dtype)
    v_cache[slots.long(), positions.long()] = v.to(v_cache.dtype)


REFERENCE = KernelSet(
    rms_norm=ref_rms_norm, fused_add_rms_norm=ref_fused_add_rms_norm,
    silu_and_mul=ref_silu_and_mul, rotary=ref_rotary,
    attention_prefill=ref_attention_prefill, attention_decode=ref_attention_decode,
    kv_write=ref_kv_write)
"""FP32 references of every entrypoint (the operator oracle's and the model oracle's)."""

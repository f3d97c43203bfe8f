"""The builtin engine's model: a Qwen3-shaped decoder whose kernels come from a kernel tree.

The decoder is written once and runs three ways: the engine's prefill (one sequence, eager),
the engine's decode step (every slot, captured in a CUDA graph on a GPU) and the oracle's FP32
teacher-forced forward (the reference kernels, no cache). Only the kernels of
``kernels_api.ENTRYPOINTS`` are replaceable; the matmuls, the embedding and the lm head are torch.

Weights are random but reproducible bit for bit on every host and PyTorch version: each value is
a uniform number made from an integer hash of (seed, tensor name, index), computed with exact
integer arithmetic and one correctly rounded multiply (no library random generator, whose
streams may change between releases). The file they are saved in therefore has one digest.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from aka_core.plugin import ConfigError, Problem

if TYPE_CHECKING:
    import torch

    from aka_backend_e2e.kernels_api import KernelSet


@attrs.frozen(kw_only=True)
class ModelConfig:
    """The shape of a Qwen3-style decoder."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float
    eps: float

    @property
    def q_size(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim


CONFIGS: dict[str, ModelConfig] = {
    "qwen3-0.6b": ModelConfig(name="qwen3-0.6b", hidden=1024, layers=28, heads=16, kv_heads=8,
                              head_dim=128, intermediate=3072, vocab=151936, rope_theta=1e6,
                              eps=1e-6),
    "tiny": ModelConfig(name="tiny", hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                        intermediate=128, vocab=512, rope_theta=1e4, eps=1e-6),
}


def config_by_name(name: str) -> ModelConfig:
    config = CONFIGS.get(name)
    if config is None:
        raise ConfigError(Problem(f"unknown builtin model config {name!r}", field="model.config",
                                  hint=f"choose one of {', '.join(sorted(CONFIGS))}"))
    return config


# --------------------------------------------------------------------------- weights


def weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model by name (the lm head is tied to the embedding)."""
    h, c = config.hidden, config
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (c.vocab, h)}
    for i in range(c.layers):
        p = f"layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "qkv_proj.weight"] = (c.q_size + 2 * c.kv_size, h)
        shapes[p + "q_norm.weight"] = (c.head_dim,)
        shapes[p + "k_norm.weight"] = (c.head_dim,)
        shapes[p + "o_proj.weight"] = (h, c.q_size)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "gate_up_proj.weight"] = (2 * c.intermediate, h)
        shapes[p + "down_proj.weight"] = (h, c.intermediate)
    shapes["norm.weight"] = (h,)
    return shapes


_CHUNK = 1 << 20


def _hash32(x: Any) -> Any:
    """Wellons' lowbias32 integer hash, in place on a numpy uint32 array (wrapping)."""
    import numpy as np

    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def hashed_uniform(numel: int, seed: int, name: str) -> torch.Tensor:
    """``numel`` float32 values in (-1, 1), uniform, a pure function of (seed, name, index)."""
    import numpy as np
    import torch

    key = hashlib.sha256(f"aka-e2e:{seed}:{name}".encode()).digest()
    k1 = np.uint32(int.from_bytes(key[:4], "little"))
    k2 = np.uint32(int.from_bytes(key[4:8], "little"))
    if numel >= 2**32:
        raise ValueError(f"{name}: {numel} values are more than one hash stream holds")
    out = np.empty(numel, dtype=np.float32)
    for start in range(0, numel, _CHUNK):
        n = min(_CHUNK, numel - start)
        h = np.arange(start, start + n, dtype=np.uint32)
        h ^= k1
        h = _hash32(h)
        h ^= k2
        h = _hash32(h)
        h >>= np.uint32(8)
        # 24 bits -> (2m + 1) / 2**24 - 1: exact in float32, symmetric, never 0 or +-1.
        chunk = out[start:start + n]
        np.multiply(h, np.float32(2.0 ** -23), out=chunk, casting="unsafe")
        chunk += np.float32(2.0 ** -24 - 1.0)
    return torch.from_numpy(out)


def init_weights(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """The model's weights (bfloat16, CPU): linear layers uniform with std 1/sqrt(fan_in) (so
    every layer's output is of the order of its input and the model mixes context), the
    embedding with std 1/sqrt(hidden) (logits of std ~1 through the tied lm head), norm weights
    uniform in 1 +- 0.2."""
    import torch

    weights: dict[str, torch.Tensor] = {}
    for name, shape in weight_shapes(config).items():
        numel = math.prod(shape)
        u = hashed_uniform(numel, seed, name)
        if name.endswith("norm.weight"):
            values = u.mul_(0.2).add_(1.0)
        else:
            fan_in = config.hidden if name == "embed_tokens.weight" else shape[1]
            values = u.mul_(math.sqrt(3.0 / fan_in))
        weights[name] = values.to(torch.bfloat16).reshape(shape)
    return weights


def check_weights(config: ModelConfig, weights: Mapping[str, torch.Tensor], source: str) -> None:
    """Every expected tensor is there with its shape (a clear error otherwise)."""
    expected = weight_shapes(config)
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise ConfigError(Problem(f"the weights lack {', '.join(missing[:5])}"
                                  f"{' ...' if len(missing) > 5 else ''} for model "
                                  f"{config.name!r}", hint=f"regenerate {source}"))
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise ConfigError(Problem(f"{name} has shape {list(weights[name].shape)}, the model "
                                      f"{config.name!r} needs {list(shape)}",
                                      hint=f"regenerate {source}"))


# --------------------------------------------------------------------------- rotary table


def rope_table(config: ModelConfig, max_len: int, device: Any = "cpu") -> torch.Tensor:
    """cos_sin[max_len, head_dim] float32, NeoX style: the first half cos, the second sin.
    Computed in float64 on the CPU, so the engine and the oracle get the same table."""
    import torch

    half = config.head_dim // 2
    inv_freq = config.rope_theta ** (-torch.arange(0, half, dtype=torch.float64) * 2
                                     / config.head_dim)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
    table = torch.cat([angles.cos(), angles.sin()], dim=-1).to(torch.float32)
    return table.to(device)


# --------------------------------------------------------------------------- the decoder

Attention = Callable[[int, "torch.Tensor", "torch.Tensor", "torch.Tensor"], "torch.Tensor"]
"""(layer, q[T,Hq,D], k[T,Hk,D], v[T,Hk,D]) -> [T,Hq,D]: prefill, decode or teacher-forced."""


@attrs.frozen
class _Layer:
    input_norm: Any
    qkv: Any
    q_norm: Any
    k_norm: Any
    o: Any
    post_norm: Any
    gate_up: Any
    down: Any


class Decoder:
    """The forward pass; weights already on their device in the compute dtype."""

    def __init__(self, config: ModelConfig, weights: Mapping[str, torch.Tensor],
                 kernels: KernelSet):
        self.config = config
        self.kernels = kernels
        self.embed = weights["embed_tokens.weight"]
        self.final_norm = weights["norm.weight"]
        self.layers = [_Layer(*(weights[f"layers.{i}.{part}.weight"] for part in (
            "input_layernorm", "qkv_proj", "q_norm", "k_norm", "o_proj",
            "post_attention_layernorm", "gate_up_proj", "down_proj")))
            for i in range(config.layers)]
        self.scale = config.head_dim ** -0.5

    def hidden_states(self, token_ids: torch.Tensor, positions: torch.Tensor,
                      cos_sin: torch.Tensor, attention: Attention) -> torch.Tensor:
        """The final normed hidden states [T, H] of tokens at ``positions``."""
        import torch.nn.functional as F

        c, kn = self.config, self.kernels
        t = token_ids.shape[0]
        x = F.embedding(token_ids, self.embed)
        residual: torch.Tensor | None = None
        for i, layer in enumerate(self.layers):
            if residual is None:
                residual = x
                h = kn.rms_norm(x, layer.input_norm, c.eps)
            else:
                h, residual = kn.fused_add_rms_norm(x, residual, layer.input_norm, c.eps)
            q, k, v = F.linear(h, layer.qkv).split([c.q_size, c.kv_size, c.kv_size], dim=-1)
            q = kn.rms_norm(q.reshape(t * c.heads, c.head_dim), layer.q_norm, c.eps)
            k = kn.rms_norm(k.reshape(t * c.kv_heads, c.head_dim), layer.k_norm, c.eps)
            q, k = kn.rotary(q.view(t, c.heads, c.head_dim), k.view(t, c.kv_heads, c.head_dim),
                             positions, cos_sin)
            v = v.reshape(t, c.kv_heads, c.head_dim).contiguous()
            o = attention(i, q, k, v)
            x = F.linear(o.reshape(t, c.q_size), layer.o)
            h, residual = kn.fused_add_rms_norm(x, residual, layer.post_norm, c.eps)
            x = F.linear(kn.silu_and_mul(F.linear(h, layer.gate_up)), layer.down)
        assert residual is not None
        h, _ = kn.fused_add_rms_norm(x, residual, self.final_norm, c.eps)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The lm head (tied to the embedding), in the compute dtype."""
        import torch.nn.functional as F

        return F.linear(hidden, self.embed)

    def teacher_forced_logits(self, token_ids: torch.Tensor, first: int = 0) -> torch.Tensor:
        """Logits [T - first, V] of the positions from ``first`` of one sequence, without a
        cache (the oracle)."""
        import torch

        t = token_ids.shape[0]
        positions = torch.arange(t, dtype=torch.int64, device=token_ids.device)
        cos_sin = rope_table(self.config, t, token_ids.device)
        prefill = self.kernels.attention_prefill

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return prefill(q, k, v, self.scale)

        return self.logits(self.hidden_states(token_ids, positions, cos_sin, attend)[first:])

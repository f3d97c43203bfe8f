"""The ops of the mock engine (``mock_openai_server``): what launch.py's patch table replaces
with a kernel tree's entrypoints in tests, as it replaces vllm._custom_ops in vLLM."""

from __future__ import annotations

from typing import Any

OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary", "attention_prefill",
       "attention_decode", "kv_write")

PATCHES = {name: (f"fake_engine_ops:{name}", "same") for name in OPS}
"""The mock engine's patch table (entrypoint -> module:attr, calling convention)."""


def _engine_own(*args: Any, **kwargs: Any) -> None:
    return None


rms_norm = fused_add_rms_norm = silu_and_mul = rotary = _engine_own
attention_prefill = attention_decode = kv_write = _engine_own

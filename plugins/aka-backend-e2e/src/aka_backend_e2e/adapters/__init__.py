"""Engine adapters: one interface (``base.EngineAdapter``) over the builtin engine and the
OpenAI-compatible servers (vllm, sglang)."""

from __future__ import annotations

from typing import Any

ENGINES = ("builtin", "vllm", "sglang")


def openai_adapter(engine: str, **options: Any) -> Any:
    """The adapter of an OpenAI-compatible engine by name (``vllm``, ``sglang``)."""
    if engine == "vllm":
        from aka_backend_e2e.adapters.vllm import adapter
    elif engine == "sglang":
        from aka_backend_e2e.adapters.sglang import adapter
    else:
        raise ValueError(f"unknown OpenAI-compatible engine {engine!r}; choose vllm or sglang")
    return adapter(**options)


__all__ = ["ENGINES", "openai_adapter"]

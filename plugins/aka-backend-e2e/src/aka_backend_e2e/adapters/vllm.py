"""vLLM's OpenAI-compatible server as an e2e engine (``engine: vllm``).

UNVERIFIED here (vLLM cannot be installed where this was written): the flags and request fields
follow vLLM's documented ``vllm.entrypoints.openai.api_server`` (~0.8-0.10). ``ignore_eos`` and
``return_tokens_as_token_ids`` are vLLM's extra completion fields; ``/v1/models`` reports
``max_model_len``.
"""

from __future__ import annotations

from aka_backend_e2e.adapters.openai import OpenAIAdapter, ServerConfig

VLLM = ServerConfig(
    engine="vllm", main="vllm.entrypoints.openai.api_server", model_flag="--model",
    served_name_flag="--served-model-name", revision_flag="--revision", host_flag="--host",
    port_flag="--port", tensor_parallel_flag="--tensor-parallel-size",
    context_arg="max_model_len", health_path="/health",
    extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})


def adapter(**options: object) -> OpenAIAdapter:
    """An adapter for vLLM servers (``options``: ``OpenAIAdapter``'s keywords)."""
    return OpenAIAdapter(VLLM, **options)  # type: ignore[arg-type]

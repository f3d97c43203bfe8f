"""SGLang's OpenAI-compatible server as an e2e engine (``engine: sglang``).

UNVERIFIED here (SGLang cannot be installed where this was written): the flags follow
``python -m sglang.launch_server`` as documented (~0.4): ``--model-path``, ``--tp-size``,
``--context-length``; ``ignore_eos`` is a sampling parameter its completion endpoint accepts as
an extra field. Whether its streamed logprobs carry token ids (``return_tokens_as_token_ids``)
must be checked on a host with SGLang: the adapter refuses token text.
"""

from __future__ import annotations

from aka_backend_e2e.adapters.openai import OpenAIAdapter, ServerConfig

SGLANG = ServerConfig(
    engine="sglang", main="sglang.launch_server", model_flag="--model-path",
    served_name_flag="--served-model-name", revision_flag="--revision", host_flag="--host",
    port_flag="--port", tensor_parallel_flag="--tp-size", context_arg="context_length",
    health_path="/health",
    extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})


def adapter(**options: object) -> OpenAIAdapter:
    """An adapter for SGLang servers (``options``: ``OpenAIAdapter``'s keywords)."""
    return OpenAIAdapter(SGLANG, **options)  # type: ignore[arg-type]

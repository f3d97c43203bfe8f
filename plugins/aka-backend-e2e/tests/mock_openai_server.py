"""A stand-in for an OpenAI-compatible serving engine (vllm, sglang) in tests: Starlette and
uvicorn on 127.0.0.1, started through ``aka_backend_e2e.launch`` like the real servers, so the
kernel tree's entrypoints are patched into ``fake_engine_ops`` and the call-log proof is real.

Tokens are deterministic (a hash of the prompt and the position) and so are their logprobs;
the engine "computes" by calling every op of ``fake_engine_ops`` for each request (with
``--tensor-parallel-size N``: once in each of N rank processes started at startup). Behaviour
from the environment:

    MOCK_TOKENS_PER_S   tokens per second of each stream (default 2000)
    MOCK_SHORT          every response has this many tokens fewer than max_tokens
    MOCK_DROP           the N-th request (1-based) has its connection closed mid-stream
    MOCK_CRASH_AFTER    the process exits when request N+1 arrives
    MOCK_MAX_MODEL_LEN  /v1/models reports this max_model_len instead of the real one
    MOCK_SKIP_OPS       1: never call the ops (no call-log lines)
    MOCK_TOKEN_TEXT     1: stream token text instead of token ids
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys

import fake_engine_ops
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

VOCAB = 1000
STATE = {"requests": 0}


def env_int(name: str, default: int = 0) -> int:
    return int(os.environ.get(name) or default)


def token_at(prompt: list[int], position: int) -> tuple[int, float]:
    digest = hashlib.sha256(f"{prompt}:{position}".encode()).digest()
    value = int.from_bytes(digest[:8], "little")
    return value % VOCAB, -((value >> 20) % 1000) / 1000.0


def run_ops() -> None:
    """What an engine step does here: call each of the engine's ops through its module (so a
    patched op is what runs)."""
    if os.environ.get("MOCK_SKIP_OPS") == "1":
        return
    for name in fake_engine_ops.OPS:
        getattr(fake_engine_ops, name)([1.0, 2.0], [1.0, 1.0], 1e-6)


def start_ranks(count: int) -> None:
    """Tensor parallelism: rank processes, each running the ops once (started like an engine's
    workers: they inherit the environment, so launch.py's sitecustomize patches them too)."""
    code = "import mock_openai_server as m; m.run_ops()"  # this folder is on PYTHONPATH
    for rank in range(count):
        subprocess.run([sys.executable, "-c", code], env={**os.environ, "RANK": str(rank)},
                       check=True, timeout=60)


def build(args: argparse.Namespace) -> Starlette:
    speed = float(os.environ.get("MOCK_TOKENS_PER_S") or 2000.0)

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def models(request: Request) -> Response:
        max_len = env_int("MOCK_MAX_MODEL_LEN") or args.max_model_len
        return JSONResponse({"object": "list", "data": [
            {"id": args.served_model_name or args.model, "object": "model",
             "max_model_len": max_len}]})

    async def completions(request: Request) -> Response:
        body = await request.json()
        STATE["requests"] += 1
        number = STATE["requests"]
        crash_after = env_int("MOCK_CRASH_AFTER")
        if crash_after and number > crash_after:
            os._exit(17)
        if body.get("model") != (args.served_model_name or args.model):
            return JSONResponse({"error": "unknown model"}, status_code=404)
        prompt = list(body["prompt"])
        count = max(int(body["max_tokens"]) - env_int("MOCK_SHORT"), 0)
        drop = env_int("MOCK_DROP") == number
        as_text = os.environ.get("MOCK_TOKEN_TEXT") == "1"
        if args.tensor_parallel_size == 1:
            run_ops()

        async def stream():
            for position in range(count):
                await asyncio.sleep(1.0 / speed)
                if drop and position == count // 2:
                    raise ConnectionResetError("mock: dropping this request")
                token, logprob = token_at(prompt, position)
                shown = f"t{token}" if as_text else f"token_id:{token}"
                chunk = {"id": "cmpl-mock", "object": "text_completion", "choices": [{
                    "index": 0, "text": f" t{token}", "finish_reason": None,
                    "logprobs": {"tokens": [shown], "token_logprobs": [logprob],
                                 "top_logprobs": [{shown: logprob}], "text_offset": [0]}}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            final = {"id": "cmpl-mock", "object": "text_completion",
                     "choices": [{"index": 0, "text": "", "finish_reason": "length",
                                  "logprobs": None}]}
            yield f"data: {json.dumps(final)}\n\n"
            usage = {"id": "cmpl-mock", "object": "text_completion", "choices": [],
                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": count,
                               "total_tokens": len(prompt) + count}}
            yield f"data: {json.dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/health", health), Route("/v1/models", models),
                             Route("/v1/completions", completions, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--revision")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--max-model-len", type=int, default=2048)
    args = parser.parse_args()
    if args.tensor_parallel_size > 1:
        start_ranks(args.tensor_parallel_size)
    uvicorn.run(build(args), host=args.host, port=args.port, log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()

"""OpenAI-compatible serving engines (vllm, sglang): the real server, launched through
``aka_backend_e2e.launch`` with the arm's kernel tree in place of the engine's ops, driven over
HTTP on 127.0.0.1.

* start: the server in its own process group with fixed arguments (the workload's
  ``server_args``; the model, host, port and tensor parallelism set here) and environment; wait
  (bounded) for its health endpoint; check ``GET /v1/models`` reports the declared model and
  context length (another setting is ``SettingChanged``).
* generate: ``POST /v1/completions`` per request, streamed (SSE), prompts as token id lists,
  ``temperature 0``, ``max_tokens``, ``logprobs 1``, ``ignore_eos``; at most the case's
  ``max_concurrency`` in flight; requests sent at the case's rate by the judge's clock; tokens
  counted from the stream, each stamped with ``time.perf_counter()`` when its chunk was read.
* proof: after every generate, the call log ``launch.py`` wrote must show every declared
  entrypoint called by every rank with the arm's tree digest (``EngineProtocolError`` if not).

httpx is imported here only, lazily (the builtin engine does not need it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from aka_backend_e2e.adapters.base import (
    ARMS,
    EngineCrashed,
    EngineFailure,
    EngineProtocolError,
    EngineSetupError,
    EngineTimeout,
    KernelLoadFailed,
    Request,
    RequestResult,
    RunResult,
    SettingChanged,
)

TOKEN_ID_PREFIX = "token_id:"


@attrs.frozen(kw_only=True)
class ServerConfig:
    """How one engine's server is launched and spoken to."""

    engine: str
    """``launch.py --engine``: whose patch table and main module."""
    main: str | None = None
    """The server's main module (None: launch.py's default for the engine)."""
    patches: Mapping[str, tuple[str, str]] | None = None
    """The patch table (None: launch.py's for the engine)."""
    model_flag: str = "--model"
    served_name_flag: str | None = "--served-model-name"
    revision_flag: str | None = "--revision"
    host_flag: str = "--host"
    port_flag: str = "--port"
    tensor_parallel_flag: str = "--tensor-parallel-size"
    context_arg: str = "max_model_len"
    """The ``server_args`` key of the context length (checked against ``/v1/models``)."""
    health_path: str = "/health"
    extra_body: Mapping[str, Any] = attrs.field(factory=lambda: {
        "ignore_eos": True, "return_tokens_as_token_ids": True})
    """Fields beyond the OpenAI API the engine accepts in a completion request."""

    @property
    def fixed_args(self) -> tuple[str, ...]:
        """The ``server_args`` keys the adapter sets itself (a workload may not)."""
        flags = (self.model_flag, self.served_name_flag, self.revision_flag, self.host_flag,
                 self.port_flag, self.tensor_parallel_flag)
        return tuple(f.lstrip("-").replace("-", "_") for f in flags if f)


@attrs.frozen(kw_only=True)
class Timeouts:
    startup: float = 900.0
    """Until the health endpoint answers (model download excluded: serve from a local cache)."""
    stall: float = 120.0
    """The longest wait for the next chunk of a stream."""
    generate: float = 1800.0
    stop: float = 30.0
    connect: float = 10.0


def server_arg_list(args: Mapping[str, Any]) -> list[str]:
    """``{"max_model_len": 2048, "enforce_eager": True}`` -> ``--max-model-len 2048
    --enforce-eager``: True is a bare flag, False and None are left out, a list repeats the
    value, a mapping is passed as JSON."""
    out: list[str] = []
    for key, value in args.items():
        flag = key if key.startswith("-") else "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list | tuple):
            out += [flag, *map(str, value)]
        elif isinstance(value, Mapping):
            out += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            out += [flag, str(value)]
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def token_id(entry: Any) -> int | None:
    """A streamed token as an id: ``"token_id:123"`` (vllm's ``return_tokens_as_token_ids``)
    or an int; None when the server sent token text."""
    if isinstance(entry, int) and not isinstance(entry, bool):
        return entry
    if isinstance(entry, str) and entry.startswith(TOKEN_ID_PREFIX):
        rest = entry[len(TOKEN_ID_PREFIX):]
        if rest.isdigit():
            return int(rest)
    return None


class OpenAIAdapter:
    """Starts OpenAI-compatible servers. ``python``: the interpreter that has the engine;
    ``env``: added to every server's environment; ``arm_env``: added to one arm's (tests: a mock
    server's speed and faults)."""

    def __init__(self, config: ServerConfig, *, python: str = sys.executable,
                 timeouts: Timeouts | None = None, env: Mapping[str, str] | None = None,
                 arm_env: Mapping[str, Mapping[str, str]] | None = None,
                 keep_environment: bool = False):
        self.config = config
        self.name = config.engine
        self.python = python
        self.timeouts = timeouts or Timeouts()
        self.env = dict(env or {})
        self.arm_env = {arm: dict(v) for arm, v in (arm_env or {}).items()}
        self.keep_environment = keep_environment

    def command(self, kernels_dir: Path, workload: Any, port: int) -> list[str]:
        cfg = self.config
        fixed = set(cfg.fixed_args)
        clash = sorted(k for k in workload.server_args
                       if k.lstrip("-").replace("-", "_") in fixed)
        if clash:
            from aka_core.plugin import ConfigError, Problem

            raise ConfigError(Problem(
                f"sets {', '.join(clash)}, which aka sets itself", file=workload.path,
                field="server_args", hint="the model comes from model.id/revision, the "
                "parallelism from parallelism.tensor; host and port are chosen per run"))
        model = workload.model.id
        args = [cfg.model_flag, model]
        if cfg.served_name_flag:
            args += [cfg.served_name_flag, model]
        if cfg.revision_flag and workload.model.revision:
            args += [cfg.revision_flag, workload.model.revision]
        args += [cfg.host_flag, "127.0.0.1", cfg.port_flag, str(port),
                 cfg.tensor_parallel_flag, str(workload.tensor_parallel),
                 *server_arg_list(workload.server_args)]
        cmd = [self.python, "-m", "aka_backend_e2e.launch", "--engine", cfg.engine,
               "--kernels", str(kernels_dir),
               "--entrypoints", ",".join(workload.kernels.entrypoints)]
        if cfg.main:
            cmd += ["--main", cfg.main]
        if cfg.patches is not None:
            cmd += ["--patches", json.dumps({k: list(v) for k, v in cfg.patches.items()})]
        return [*cmd, "--", *args]

    def environment(self, arm: str, workload: Any, call_log: Path, scratch: Path
                    ) -> dict[str, str]:
        from aka_core.plugin import worker_base_environment

        base = dict(os.environ) if self.keep_environment else worker_base_environment()
        return {**base, "TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1",
                **{str(k): str(v) for k, v in workload.env.items()}, **self.env,
                **self.arm_env.get(arm, {}), "AKA_E2E_CALL_LOG": str(call_log)}

    def start(self, arm: str, kernels_dir: Path, workload: Any, case: Any,
              log_dir: Path) -> OpenAIRun:
        if arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
        from aka_backend_e2e.kernels_api import tree_digest

        kernels_dir = Path(kernels_dir).resolve()
        log_dir = Path(log_dir)
        scratch = log_dir / f"tmp.{arm}"
        scratch.mkdir(parents=True, exist_ok=True)
        call_log = log_dir / f"calls.{arm}.jsonl"
        call_log.unlink(missing_ok=True)
        port = free_port()
        run = OpenAIRun(
            arm, self.command(kernels_dir, workload, port),
            env=self.environment(arm, workload, call_log, scratch), cwd=scratch,
            log_path=log_dir / f"server.{arm}.log", port=port, config=self.config,
            timeouts=self.timeouts, model=workload.model.id,
            max_model_len=workload.server_args.get(self.config.context_arg),
            concurrency=int(case.max_concurrency), call_log=call_log,
            entrypoints=tuple(workload.kernels.entrypoints),
            ranks=int(workload.tensor_parallel), digest=tree_digest(kernels_dir))
        try:
            run.wait_ready()
            run.check_settings()
        except BaseException:
            run.stop()
            raise
        return run


class OpenAIRun:
    """One server process group serving one arm."""

    def __init__(self, arm: str, command: Sequence[str], *, env: Mapping[str, str], cwd: Path,
                 log_path: Path, port: int, config: ServerConfig, timeouts: Timeouts,
                 model: str, max_model_len: int | None, concurrency: int, call_log: Path,
                 entrypoints: Sequence[str], ranks: int, digest: str):
        self.arm = arm
        self.config = config
        self.timeouts = timeouts
        self.base_url = f"http://127.0.0.1:{port}"
        self.model = model
        self.max_model_len = max_model_len
        self.concurrency = concurrency
        self.call_log = call_log
        self.entrypoints = tuple(entrypoints)
        self.ranks = ranks
        self.digest = digest
        self.log_path = log_path
        self.info: dict[str, Any] = {"log": str(log_path), "port": port,
                                     "command": list(command)}
        self._stopped = False
        self._log = log_path.open("ab")
        try:
            self.proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd,
                                         env=dict(env), start_new_session=True)
        except OSError as exc:
            self._log.close()
            raise EngineSetupError(f"cannot start the server ({command[0]}): {exc}",
                                   arm=arm) from exc

    # ------------------------------------------------------------------ helpers
    def log_tail(self, size: int = 4000) -> str:
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - size))
                return handle.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def _failure(self, cls: type[EngineFailure], message: str, phase: str) -> EngineFailure:
        tail = self.log_tail()
        return cls(message + (f"; its log ends: {tail[-2000:]}" if tail else ""), arm=self.arm,
                   phase=phase, log=str(self.log_path))

    def _exited(self, phase: str) -> BaseException:
        """The failure for a server that exited (launch.py's exit status says whose fault)."""
        from aka_backend_e2e.launch import EXIT_KERNELS, EXIT_SETUP

        code = self.proc.returncode
        if code == EXIT_KERNELS:
            return self._failure(KernelLoadFailed, "the kernel tree did not load", phase)
        if code == EXIT_SETUP:
            return EngineSetupError(f"the {self.arm} server could not be set up: "
                                    f"{self.log_tail()[-2000:]}", arm=self.arm, phase=phase)
        return self._failure(EngineCrashed, f"the server exited (status {code})", phase)

    # ------------------------------------------------------------------ start-up
    def wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.timeouts.startup
        with httpx.Client(base_url=self.base_url, timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise self._exited("startup")
                try:
                    if client.get(self.config.health_path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise self._failure(EngineTimeout, "the server was not healthy within "
                                        f"{self.timeouts.startup:.0f} s", "startup")
                time.sleep(0.1)

    def check_settings(self) -> None:
        """``/v1/models`` must list the declared model with the declared context length."""
        import httpx

        try:
            with httpx.Client(base_url=self.base_url, timeout=self.timeouts.connect) as client:
                reply = client.get("/v1/models")
                models = reply.json().get("data") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise self._failure(EngineProtocolError, f"GET /v1/models failed: {exc}",
                                "startup") from exc
        if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
            raise self._failure(EngineProtocolError, "GET /v1/models did not list models",
                                "startup")
        served = {m.get("id"): m for m in models}
        if self.model not in served:
            raise self._failure(SettingChanged, f"the server serves {sorted(map(str, served))}, "
                                f"not the declared model {self.model}", "startup")
        self.info["models"] = models
        if self.max_model_len is not None:
            reported = served[self.model].get("max_model_len")
            if reported != int(self.max_model_len):
                raise self._failure(SettingChanged, f"the server's max_model_len is {reported}, "
                                    f"the workload declares {self.max_model_len}", "startup")

    # ------------------------------------------------------------------ serving
    def generate(self, requests: Sequence[Request], rate: float, *, seed: int = 0,
                 max_concurrency: int | None = None) -> RunResult:
        if len({r.id for r in requests}) != len(requests):
            raise ValueError("request ids must be unique")
        if self.proc.poll() is not None:
            raise self._exited("generate")
        results = {r.id: RequestResult(id=r.id, expected_tokens=r.max_tokens) for r in requests}
        violations: list[str] = []
        try:
            asyncio.run(asyncio.wait_for(self._serve(requests, rate, seed, results, violations,
                                                     max_concurrency),
                                         self.timeouts.generate))
        except TimeoutError:
            raise self._failure(EngineTimeout, f"{len(requests)} requests did not finish within "
                                f"{self.timeouts.generate:.0f} s", "generate") from None
        # Give a crashing server a moment to be seen as exited.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0.2 if any(r.error for r in results.values()) else 0)
        if self.proc.poll() is not None:
            raise self._exited("generate")
        if violations:
            raise self._failure(EngineProtocolError, "; ".join(violations[:6]), "generate")
        timed_out = [r.id for r in results.values() if r.error and "timeout" in r.error.lower()]
        if timed_out:
            raise self._failure(EngineTimeout, f"requests {', '.join(timed_out[:6])} sent "
                                f"nothing for {self.timeouts.stall:.0f} s", "generate")
        from aka_backend_e2e.launch import call_log_problems

        unproven = call_log_problems(self.call_log, self.entrypoints, self.ranks, self.digest)
        if unproven:
            raise self._failure(EngineProtocolError, "the server did not prove it ran the "
                                "kernel tree: " + "; ".join(unproven[:8]), "generate")
        sent = [r.sent for r in results.values() if r.sent is not None]
        seen = [t for r in results.values() for t in (*r.token_times, r.completed or 0.0) if t]
        start = min(sent) if sent else time.perf_counter()
        return RunResult(arm=self.arm, requests=results, start=start,
                         end=max([start, *seen]), info=dict(self.info))

    async def _serve(self, requests: Sequence[Request], rate: float, seed: int,
                     results: dict[str, RequestResult], violations: list[str],
                     max_concurrency: int | None = None) -> None:
        import httpx

        from aka_backend_e2e.measure import arrival_offsets

        limit = asyncio.Semaphore(min(self.concurrency, max_concurrency or self.concurrency))
        timeout = httpx.Timeout(connect=self.timeouts.connect, read=self.timeouts.stall,
                                write=self.timeouts.connect, pool=None)
        limits = httpx.Limits(max_connections=self.concurrency + 4,
                              max_keepalive_connections=self.concurrency + 4)
        offsets = arrival_offsets(len(requests), rate, seed)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                     limits=limits) as client:
            start = time.perf_counter()

            async def one(req: Request, offset: float) -> None:
                delay = start + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                async with limit:
                    await self._stream(client, req, results[req.id], violations)

            await asyncio.gather(*(one(r, o) for r, o in zip(requests, offsets, strict=True)))

    def body(self, req: Request) -> dict[str, Any]:
        return {"model": self.model, "prompt": list(req.prompt), "max_tokens": req.max_tokens,
                "temperature": 0, "logprobs": 1, "stream": True,
                "stream_options": {"include_usage": True}, **self.config.extra_body}

    async def _stream(self, client: Any, req: Request, got: RequestResult,
                      violations: list[str]) -> None:
        import httpx

        body = self.body(req)
        usage: int | None = None
        got.sent = time.perf_counter()
        try:
            async with client.stream("POST", "/v1/completions", json=body) as response:
                if response.status_code != 200:
                    text = (await response.aread())[:300].decode(errors="replace")
                    got.error = f"HTTP {response.status_code}: {text}"
                    return
                async for line in response.aiter_lines():
                    at = time.perf_counter()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        got.completed = at
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        violations.append(f"{req.id}: a stream chunk is not JSON")
                        return
                    if isinstance(chunk.get("usage"), dict):
                        usage = chunk["usage"].get("completion_tokens")
                    for choice in chunk.get("choices") or []:
                        problem = self._take_choice(choice, got, at)
                        if problem:
                            violations.append(f"{req.id}: {problem}")
                            return
                else:
                    got.error = "the stream ended without [DONE]"
        except httpx.TimeoutException as exc:
            got.error = f"timeout: {type(exc).__name__}"
        except httpx.HTTPError as exc:
            got.error = f"{type(exc).__name__}: {exc}"[:300]
        if got.completed is not None and usage is not None and usage != len(got.tokens):
            violations.append(f"{req.id}: the server reports {usage} completion tokens, the "
                              f"stream carried {len(got.tokens)}")

    @staticmethod
    def _take_choice(choice: Any, got: RequestResult, at: float) -> str | None:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        if logprobs is None:
            return None if isinstance(choice, dict) and not choice.get("text") else \
                "a chunk carries text but no logprobs"
        tokens = logprobs.get("tokens") or []
        values = logprobs.get("token_logprobs") or []
        if len(tokens) != len(values):
            return "a chunk's tokens and logprobs differ in number"
        for entry, value in zip(tokens, values, strict=True):
            tid = token_id(entry)
            if tid is None:
                return (f"token {str(entry)[:40]!r} is not an id (the server must return "
                        "tokens as ids: return_tokens_as_token_ids)")
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"logprob {value!r} is not a number"
            if len(got.tokens) >= got.expected_tokens:
                return f"more than max_tokens ({got.expected_tokens}) tokens"
            got.add(tid, float(value), at)
        return None

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeouts.stop`` (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=self.timeouts.stop)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of the group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._log.close()


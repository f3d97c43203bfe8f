"""The builtin serving engine: fixed slots, continuous batching, greedy decoding with logprobs.

Each ``step``: waiting requests are admitted into free slots (each prefilled alone, which
yields its first token), then one decode step runs for every slot at once. Inactive slots are
padding (token 0 at position 0, attending to one position; their outputs are ignored), so the
decode step has one static shape: on a GPU it is captured once in a CUDA graph and replayed.

The decode steps run one ahead of the host. A step's inputs (each slot's token, position, cache
length and whether it is live) are the engine's own device state, ``state``; the step's last
operations write the next step's inputs there (the chosen tokens; positions and lengths of live
slots one further), so consecutive steps need nothing from the host. The host launches step k+1,
then reads step k's tokens (copied to pinned memory behind it) and emits them while the GPU runs
k+1: the GPU goes from step to step without waiting for the host, and a host that is slow for a
moment (the scheduler, another tenant of the core) does not slow the steps down. The host knows
ahead which step ends which request (every request runs to ``max_tokens``), so it knows when the
slots change: then it waits for the device, emits every pending step, admits waiting requests
(each prefill waits for its first token) and writes ``state`` from its own bookkeeping. The
kernels see a copy of the inputs (``step_in``), made at the start of every step: a kernel that
writes into its inputs cannot change what the next step computes.

On a GPU (``graph=True``) a prefill is replayed from a CUDA graph too, one per prompt length,
captured the first time that length is prefilled (the engine's and the workload's warm-up
requests see a case's lengths before its timed ones). Its static inputs are the prompt's tokens,
the positions 0..T-1 and the slot broadcast to [T] (where ``kv_write`` puts the prompt's keys and
values); its body is the eager prefill's (the same kernels in the same order), so its tokens and
logprobs are the eager ones. Every graph, decode and prefill, draws on one memory pool (only one
runs at a time). At most ``MAX_PREFILL_GRAPHS`` lengths are captured; a prompt of any other
length is then prefilled eagerly. On a CPU, or with ``graph=False``, everything is eager.

A closed-loop client (the judge: ``max_concurrency`` requests in flight, the next one sent as
soon as one is done) can say how many more requests it will send and its window (``expect``).
While it has promised more and fewer than its window are here, a step that frees a slot is
followed by a wait for the client's next request rather than by the next decode step: a
replacement is admitted at the step after the one that freed its slot, whatever the host's and
the pipe's timing. Without it, whether the request arrived before or after the host launched the
next step (a race of a pipe's round trip against a step's launch) moved its prefill by a whole
step, and a run's duration by several steps from run to run.

Every request runs to ``max_tokens`` (ignore_eos: the work is fixed). The engine's timings are
diagnostics; the judge times the lines it reads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from aka_backend_e2e.model import Decoder, ModelConfig, rope_table

if TYPE_CHECKING:
    import torch

    from aka_backend_e2e.kernels_api import KernelSet

Emit = Callable[[dict[str, Any]], None]
LOGPROB_DIGITS = 6
MAX_PREFILL_GRAPHS = 32
"""Prompt lengths whose prefill is captured in a CUDA graph; other lengths prefill eagerly."""

_CAPTURE_RULE = ("does a kernel wait for the host, e.g. .item() or .cpu(), or allocate pinned "
                 "memory?")


class RequestError(ValueError):
    """A request the engine cannot serve (malformed, too long, a duplicate id)."""


@attrs.frozen
class Request:
    id: str
    prompt: tuple[int, ...]
    max_tokens: int

    @classmethod
    def from_json(cls, data: Any) -> Request:
        if not isinstance(data, dict):
            raise RequestError("a request must be a JSON object")
        rid, prompt, max_tokens = data.get("id"), data.get("prompt"), data.get("max_tokens")
        if not isinstance(rid, str) or not rid or len(rid) > 200:
            raise RequestError("a request's id must be a non-empty string of at most 200 "
                               "characters")
        if not isinstance(prompt, list) or not prompt or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            raise RequestError(f"request {rid!r}: prompt must be a non-empty list of token ids")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise RequestError(f"request {rid!r}: max_tokens must be a positive integer")
        return cls(id=rid, prompt=tuple(prompt), max_tokens=max_tokens)


@attrs.define
class _PrefillGraph:
    """The static inputs of one prompt length's prefill graph, the graph and its output."""

    tokens: torch.Tensor
    """[T] int64: the prompt, copied in before each replay."""
    positions: torch.Tensor
    """[T] int64: 0..T-1 (constant)."""
    slots: torch.Tensor
    """[T] int64: the slot being prefilled, broadcast (filled before each replay)."""
    graph: Any = None
    out: torch.Tensor | None = None
    """[2, 1] float32: the token and its logprob (``_greedy`` of the last row)."""
    replays: int = 0


@attrs.define
class _Active:
    request: Request
    position: int
    """Where the next input token goes (the number of tokens in the slot's cache), counting
    every launched step."""
    last_token: int
    """The last token emitted (the device's ``state`` holds the next input of a launched
    step)."""
    generated: int
    """Tokens generated by the launched steps."""

    @property
    def finishing(self) -> bool:
        """Its last token is launched: the slot changes once that token is emitted."""
        return self.generated >= self.request.max_tokens


@attrs.define
class _Pending:
    """A launched decode step whose tokens the host has not emitted yet."""

    slots: list[tuple[int, _Active, bool]]
    """The live slots of the step, each with whether the step gives its request the last
    token."""
    out: torch.Tensor
    """[2, S] float32 on the host (pinned on a GPU): the step's tokens and logprobs, once
    ``ready`` has completed."""
    ready: Any = None
    """The CUDA event recorded after the copy (None: the copy is done)."""


class BuiltinEngine:
    def __init__(self, config: ModelConfig, weights: Mapping[str, torch.Tensor],
                 kernels: KernelSet, slots: int, max_len: int, device: Any = "cpu",
                 dtype: Any = None, graph: bool = True):
        import torch

        if slots < 1 or max_len < 2:
            raise ValueError(f"slots ({slots}) must be >= 1 and max_len ({max_len}) >= 2")
        self.config = config
        self.device = torch.device(device)
        self.dtype = dtype if dtype is not None else torch.bfloat16
        self.slots = slots
        self.max_len = max_len
        on_device = {name: w.to(device=self.device, dtype=self.dtype)
                     for name, w in weights.items()}
        self.model = Decoder(config, on_device, kernels)
        self.kernels = kernels
        self.cos_sin = rope_table(config, max_len, self.device)
        shape = (slots, max_len, config.kv_heads, config.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                        for _ in range(config.layers)]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                        for _ in range(config.layers)]
        self.active: list[_Active | None] = [None] * slots
        self.waiting: deque[Request] = deque()
        self.known: set[str] = set()
        self.decode_steps = 0
        self.prefills = 0
        self.promised = 0
        """Requests the client said it will still send (``expect``)."""
        self.window = 0
        """The client's limit of requests in flight (``expect``)."""
        # The decode step's inputs, the engine's own: rows token, position, seq_len, live of
        # every slot (an inactive slot: token 0 at position 0, seq_len 1, not live), advanced by
        # each step; the kernels get a copy of the first three rows, step_in.
        self.state = torch.zeros((4, slots), dtype=torch.int64, device=self.device)
        self.state[2].fill_(1)
        self.step_in = torch.zeros((3, slots), dtype=torch.int64, device=self.device)
        self.slot_ids = torch.arange(slots, dtype=torch.int64, device=self.device)
        pinned = self.device.type == "cuda"
        self.host_in = torch.zeros((4, slots), dtype=torch.int64, pin_memory=pinned)
        self.host_out = [torch.zeros((2, slots), dtype=torch.float32, pin_memory=pinned)
                         for _ in range(2)]
        """Two pinned buffers the decode steps' outputs are copied to, in turn (each with the
        event recorded after its copy, on a GPU)."""
        self.host_ready = ([torch.cuda.Event() for _ in self.host_out]
                           if self.device.type == "cuda" else None)
        self.pending: deque[_Pending] = deque()
        self.state_stale = False
        """The slots changed since ``state`` was written: write it before the next step."""
        self.graph: Any = None
        self.graph_out: torch.Tensor | None = None
        self.graph_pool: Any = None
        self.graph_prefill = bool(graph and self.device.type == "cuda")
        """Whether prefills run from CUDA graphs (one per prompt length, captured lazily)."""
        self.prefill_graphs: dict[int, _PrefillGraph] = {}
        self.prefill_host = torch.zeros(max_len, dtype=torch.int64, pin_memory=pinned)
        """The staging buffer of a graphed prefill's prompt (pinned on a GPU)."""
        if graph and self.device.type == "cuda":
            self.graph_pool = torch.cuda.graph_pool_handle()
            self._capture()

    # ------------------------------------------------------------------ requests
    @property
    def has_work(self) -> bool:
        return (bool(self.waiting) or bool(self.pending)
                or any(a is not None for a in self.active))

    @property
    def awaiting(self) -> bool:
        """A slot is free, no request waits, and the client promised one (fewer than its window
        are here): the next step waits for it (``step`` launches nothing meanwhile)."""
        if self.promised <= 0 or self.waiting or self.pending:
            return False
        here = sum(a is not None for a in self.active)
        return here < min(self.window, self.slots)

    def expect(self, more: int, window: int) -> None:
        """The client will send ``more`` requests after the ones submitted so far, each as soon
        as one of its ``window`` in flight is done (0: it promises nothing; the engine never
        waits)."""
        if more < 0 or window < 0:
            raise RequestError(f"expect: more ({more}) and window ({window}) must be >= 0")
        self.promised, self.window = more, window

    def submit(self, requests: Sequence[Request]) -> None:
        """Queue requests, all or none (each validated against the vocabulary, the cache
        length and the ids in use)."""
        ids = [r.id for r in requests]
        for request in requests:
            self._check(request)
            if ids.count(request.id) > 1:
                raise RequestError(f"request id {request.id!r} appears twice")
        self.known.update(ids)
        self.waiting.extend(requests)

    def _check(self, request: Request) -> None:
        if request.id in self.known:
            raise RequestError(f"request id {request.id!r} is already in use")
        vocab = self.config.vocab
        if any(not 0 <= t < vocab for t in request.prompt):
            raise RequestError(f"request {request.id!r}: token ids must be in [0, {vocab})")
        # The last generated token is never fed back, so it needs no cache position.
        need = len(request.prompt) + request.max_tokens - 1
        if need > self.max_len:
            raise RequestError(f"request {request.id!r}: prompt ({len(request.prompt)}) + "
                               f"max_tokens ({request.max_tokens}) - 1 = {need} exceeds "
                               f"max_len {self.max_len}")

    # ------------------------------------------------------------------ stepping
    def step(self, emit: Emit) -> None:
        """Launch one decode step and emit the one before it. When the slots change (a
        request's last token was launched, or a request waits and a slot is free): first
        emit every pending step, admit waiting requests into free slots (a prefill each) and
        write the device's state.

        Emits ``{"step": [[id, token, logprob], ...]}`` per prefill and per decode step, and
        ``{"done": id}`` for each request that finished, in the order the steps ran. Launches
        nothing while ``awaiting`` (the caller waits for the client's request)."""
        free = any(a is None for a in self.active)
        if any(a is not None and a.finishing for a in self.active) or (self.waiting and free):
            self._drain(emit)
            for slot in range(self.slots):
                if self.active[slot] is None and self.waiting:
                    self._prefill(slot, self.waiting.popleft(), emit)
        if self.awaiting:
            return  # the client's next request comes before the next step
        if any(a is not None for a in self.active):
            self._launch_decode()
        keep = 1 if any(a is not None and not a.finishing for a in self.active) else 0
        while len(self.pending) > keep:
            self._emit_pending(emit)

    def _drain(self, emit: Emit) -> None:
        """Emit every launched step (waiting for the device)."""
        while self.pending:
            self._emit_pending(emit)

    def _finish_or_keep(self, slot: int, active: _Active, emit: Emit) -> None:
        if active.finishing:
            self.active[slot] = None
            self.known.discard(active.request.id)
            self.state_stale = True
            emit({"done": active.request.id})

    def _prefill(self, slot: int, request: Request, emit: Emit) -> None:
        import torch

        t = len(request.prompt)
        static = self._prefill_graph(t, request.prompt, slot)
        if static is None:
            tokens = torch.tensor(request.prompt, dtype=torch.int64).to(self.device)
            positions = torch.arange(t, dtype=torch.int64, device=self.device)
            slots = torch.full((t,), slot, dtype=torch.int64, device=self.device)
            out = self._prefill_body(tokens, positions, slots)
        else:
            static.graph.replay()
            static.replays += 1
            out = static.out
        assert out is not None
        token, logprob = out.cpu()[:, 0].tolist()  # waits for the device
        self.prefills += 1
        active = _Active(request=request, position=t, last_token=int(token), generated=1)
        self.active[slot] = active
        self.state_stale = True
        emit({"step": [[request.id, int(token), round(logprob, LOGPROB_DIGITS)]]})
        self._finish_or_keep(slot, active, emit)

    def _prefill_body(self, tokens: torch.Tensor, positions: torch.Tensor,
                      slots: torch.Tensor) -> torch.Tensor:
        """One sequence's prefill: its keys and values written into the cache at (``slots``,
        ``positions``), and [2, 1] float32 (token, logprob) of its last position. No host sync
        (captured in a CUDA graph per prompt length on a GPU)."""
        kn, scale = self.kernels, self.model.scale

        def attend(layer: int, q: Any, k: Any, v: Any) -> Any:
            kn.kv_write(k, v, self.k_cache[layer], self.v_cache[layer], slots, positions)
            return kn.attention_prefill(q, k, v, scale)

        hidden = self.model.hidden_states(tokens, positions, self.cos_sin, attend)
        return _greedy(self.model.logits(hidden[-1:]))

    def _prefill_graph(self, t: int, prompt: Sequence[int], slot: int) -> _PrefillGraph | None:
        """The graph of prompt length ``t`` with ``prompt`` and ``slot`` in its static inputs,
        captured now if this length is new and fewer than ``MAX_PREFILL_GRAPHS`` are; None: an
        eager prefill."""
        import torch

        if not self.graph_prefill:
            return None
        static = self.prefill_graphs.get(t)
        if static is None:
            if len(self.prefill_graphs) >= MAX_PREFILL_GRAPHS:
                return None
            static = _PrefillGraph(
                tokens=torch.zeros(t, dtype=torch.int64, device=self.device),
                positions=torch.arange(t, dtype=torch.int64, device=self.device),
                slots=torch.zeros(t, dtype=torch.int64, device=self.device))
            self._load_prefill(static, prompt, slot)
            self._capture_prefill(static)
            self.prefill_graphs[t] = static
        else:
            self._load_prefill(static, prompt, slot)
        return static

    def _load_prefill(self, static: _PrefillGraph, prompt: Sequence[int], slot: int) -> None:
        """Copy a prompt and its slot into a prefill graph's static inputs (no host wait: the
        staging buffer is pinned, and the previous prefill's read of its output has waited for
        the previous copy)."""
        import torch

        t = len(prompt)
        staged = self.prefill_host[:t]
        staged.copy_(torch.tensor(prompt, dtype=torch.int64))
        static.tokens.copy_(staged, non_blocking=True)
        static.slots.fill_(slot)

    def _capture_prefill(self, static: _PrefillGraph) -> None:
        """Capture the prefill of ``static``'s length (after warm-up launches on a side stream,
        as for the decode step; they write the slot being prefilled, which holds no sequence)."""
        def body() -> torch.Tensor:
            return self._prefill_body(static.tokens, static.positions, static.slots)

        t = static.tokens.shape[0]
        static.graph, static.out = self._capture_graph(body, f"the prefill of {t} tokens")

    def _capture_graph(self, body: Callable[[], torch.Tensor],
                       what: str) -> tuple[Any, torch.Tensor]:
        """A CUDA graph of ``body`` in the engine's memory pool, and its static output; warm-up
        launches run on a side stream first, as PyTorch's CUDA-graph docs prescribe (lazy
        initialisation and autotuning happen outside). A RuntimeError naming the kernels' rule
        when it cannot be captured."""
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.graph_pool):
                out = body()
            torch.cuda.synchronize()
        except Exception as exc:
            raise RuntimeError(f"{what} cannot be captured in a CUDA graph ({_CAPTURE_RULE}): "
                               f"{type(exc).__name__}: {exc}") from exc
        return graph, out

    def _decode_graph_body(self) -> torch.Tensor:
        """One decode step of every slot from ``state``: [2, S] float32 rows (token, logprob),
        and ``state`` advanced to the next step's inputs. No host sync (captured in a CUDA
        graph on a GPU)."""
        import torch

        self.step_in.copy_(self.state[:3])
        tokens, positions = self.step_in[0], self.step_in[1]
        seq_lens = self.step_in[2].to(torch.int32)
        kn, scale, slot_ids = self.kernels, self.model.scale, self.slot_ids

        def attend(layer: int, q: Any, k: Any, v: Any) -> Any:
            kc, vc = self.k_cache[layer], self.v_cache[layer]
            kn.kv_write(k, v, kc, vc, slot_ids, positions)
            return kn.attention_decode(q, kc, vc, seq_lens, scale)

        hidden = self.model.hidden_states(tokens, positions, self.cos_sin, attend)
        out = _greedy(self.model.logits(hidden))
        live = self.state[3]
        self.state[0].copy_(out[0])  # exact: token ids < 2**24
        self.state[1].add_(live)
        self.state[2].add_(live)
        return out

    def _capture(self) -> None:
        """Capture the decode step once."""
        self.graph, self.graph_out = self._capture_graph(self._decode_graph_body,
                                                         "the decode step")

    def _write_state(self) -> None:
        """Write every slot's inputs from the host's bookkeeping (after a drain: every last
        token is known)."""
        import torch

        rows: list[int] = []
        for active in self.active:
            if active is None:
                rows.extend((0, 0, 1, 0))
            else:
                rows.extend((active.last_token, active.position, active.position + 1, 1))
        # Slot-major in the list; the buffer is [4, S] (token, position, seq_len, live rows).
        self.host_in.copy_(torch.tensor(rows, dtype=torch.int64).view(self.slots, 4).t())
        self.state.copy_(self.host_in, non_blocking=True)
        self.state_stale = False

    def _launch_decode(self) -> None:
        """Launch one decode step of every slot, its output copied to the host behind it; the
        host's bookkeeping moves on as if it had run."""
        if self.state_stale:
            self._write_state()
        if self.graph is not None:
            self.graph.replay()
            out = self.graph_out
        else:
            out = self._decode_graph_body()
        assert out is not None
        turn = self.decode_steps % len(self.host_out)
        host, ready = self.host_out[turn], None
        if self.host_ready is not None:
            host.copy_(out, non_blocking=True)
            ready = self.host_ready[turn]
            ready.record()
        else:
            host.copy_(out)
        self.decode_steps += 1
        live: list[tuple[int, _Active, bool]] = []
        for slot, active in enumerate(self.active):
            if active is None:
                continue
            active.position += 1
            active.generated += 1
            live.append((slot, active, active.finishing))
        self.pending.append(_Pending(slots=live, out=host, ready=ready))

    def _emit_pending(self, emit: Emit) -> None:
        """Emit the oldest launched step (waiting for its copy), and end the requests it
        finished."""
        pending = self.pending.popleft()
        if pending.ready is not None:
            pending.ready.synchronize()
        tokens, logprobs = pending.out.tolist()
        line: list[list[Any]] = []
        for slot, active, _ in pending.slots:
            token = int(tokens[slot])
            line.append([active.request.id, token, round(logprobs[slot], LOGPROB_DIGITS)])
            active.last_token = token
        emit({"step": line})
        for slot, active, last in pending.slots:
            if last:
                self._finish_or_keep(slot, active, emit)

    # ------------------------------------------------------------------ convenience
    def generate(self, requests: Sequence[Request]) -> dict[str, tuple[list[int], list[float]]]:
        """Run ``requests`` to completion: id -> (generated tokens, their logprobs)."""
        results: dict[str, tuple[list[int], list[float]]] = {r.id: ([], []) for r in requests}

        def collect(line: dict[str, Any]) -> None:
            for rid, token, logprob in line.get("step", ()):
                results[rid][0].append(token)
                results[rid][1].append(logprob)

        self.submit(requests)
        while self.has_work:
            self.step(collect)
        return results


def _greedy(logits: torch.Tensor) -> torch.Tensor:
    """[2, N] float32: the argmax token of each row (exact in float32: ids < 2**24) and its
    log-probability (log_softmax in float32)."""
    import torch

    logits = logits.float()
    chosen = logits.argmax(-1)
    logprob = logits.log_softmax(-1).gather(-1, chosen[:, None])[:, 0]
    return torch.stack([chosen.to(torch.float32), logprob])

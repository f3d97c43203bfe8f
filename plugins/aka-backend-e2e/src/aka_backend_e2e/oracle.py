"""Correctness of an engine's kernels, in the judge's process, against FP32 references.

Two oracles:

* **Model level** (``score_sequences``): the engine's greedy sequences are teacher-forced through
  the same model in float32 with ``kernels_api.REFERENCE`` (one forward per sequence, no cache).
  For each generated token: the regret ``max_v logp_ref(v) - logp_ref(chosen)`` (0 when the
  engine chose the reference's argmax; a bf16 engine near a tie may pay a little) and the
  engine's logprob error ``|logp_engine - logp_ref|``.
* **Operator level** (``operator_cases`` / ``reference_outputs`` / ``compare_outputs``): inputs
  for each entrypoint in the model's shapes, with odd sizes (1, 7, 9, 37 tokens, an odd cache
  length) and rows scaled to 1e-3 (where ``eps`` matters: a wrong eps shows), garbage in the
  cache beyond each sequence (where attention must not look), compared with FP32 references.

Tolerances (``TOLERANCES``), for bfloat16 outputs against the FP32 reference of the same
(bf16-rounded) inputs: an element passes when ``|out - ref| <= rtol * |ref| + atol * rms(row)``,
``rms(row)`` the root mean square of the reference's last-dimension row (so a row of 1e-3 is held
to its own scale, not to the scale of its neighbours). bf16 keeps 8 significant bits (one
rounding is at most 2**-9 relative); the eager baseline rounds 2-4 times per output, and its
attention also rounds the scores and the probabilities to bf16. Measured on these cases (ten
seeds, tiny and qwen3-0.6b shapes), the baseline's worst element uses at most ~0.5 of the
tolerances below, which are therefore about 2x above it: rtol = atol = 2**-6 (1.6%) for the
elementwise kernels (norms, activation, rotary), 2**-4 (6.25%) for the attention kernels;
``kv_write`` is a copy and must be exact. The known bugs miss by far more: a wrong eps (1e-2)
by ~50x on the rows scaled to 1e-3, gelu for silu 10-18x, an off-by-one rotary 70-120x (or an index
error at the table's last row), a missing causal mask 30-80x, a stale or misplaced cache write
and a no-op norm without bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from aka_backend_e2e.kernels_api import ENTRYPOINTS, IN_PLACE_OUTPUTS, REFERENCE, KernelSet
from aka_backend_e2e.model import Decoder, ModelConfig, rope_table

if TYPE_CHECKING:
    import torch

# --------------------------------------------------------------------------- model level


@attrs.frozen
class SequenceScore:
    """One sequence's generated tokens scored by the FP32 reference."""

    tokens: int
    max_regret: float
    mean_regret: float
    max_logprob_error: float | None
    """None when the engine gave no logprobs."""
    mismatches: int
    """Tokens that are not the reference's argmax (a bf16 engine may differ at near-ties)."""


_reference: tuple[Mapping[str, Any], tuple[str, str], Decoder] | None = None


def _reference_decoder(config: ModelConfig, weights: Mapping[str, torch.Tensor],
                       device: Any) -> Decoder:
    """The FP32 reference model; the last one is kept (the judge scores many runs with the
    same weights: converting 0.6B parameters each time would cost seconds)."""
    import torch

    global _reference
    key = (config.name, str(torch.device(device)))
    if _reference is not None and _reference[0] is weights and _reference[1] == key:
        return _reference[2]
    _reference = None  # the old model's memory goes before the new one is made
    fp32 = {name: w.to(device=device, dtype=torch.float32) for name, w in weights.items()}
    decoder = Decoder(config, fp32, REFERENCE)
    _reference = (weights, key, decoder)
    return decoder


def score_sequences(config: ModelConfig, weights: Mapping[str, torch.Tensor],
                    sequences: Sequence[tuple[Sequence[int], Sequence[int],
                                              Sequence[float] | None]],
                    device: Any = "cpu") -> list[SequenceScore]:
    """Score ``(prompt_ids, generated_ids, engine_logprobs)`` triples, one forward each.

    A sequence that cannot be scored (ids outside the vocabulary, logprobs of another length)
    is a ``ValueError``: the engine sent something malformed."""
    import torch

    decoder = _reference_decoder(config, weights, device)
    scores = []
    with torch.no_grad(), _full_fp32_matmuls():
        for index, (prompt, generated, logprobs) in enumerate(sequences):
            prompt, generated = list(prompt), list(generated)
            if not prompt or not generated:
                raise ValueError(f"sequence {index}: the prompt and the generated tokens must "
                                 "not be empty")
            if any(not (isinstance(t, int) and 0 <= t < config.vocab)
                   for t in prompt + generated):
                raise ValueError(f"sequence {index}: a token id is outside [0, {config.vocab})")
            if logprobs is not None and len(logprobs) != len(generated):
                raise ValueError(f"sequence {index}: {len(logprobs)} logprobs for "
                                 f"{len(generated)} tokens")
            ids = torch.tensor(prompt + generated[:-1], dtype=torch.int64, device=device)
            logits = decoder.teacher_forced_logits(ids, first=len(prompt) - 1)
            logp = logits.float().log_softmax(-1)
            chosen = torch.tensor(generated, dtype=torch.int64, device=device)
            chosen_logp = logp.gather(-1, chosen[:, None])[:, 0]
            regret = (logp.max(-1).values - chosen_logp).clamp_min(0.0)
            mismatches = int((logp.argmax(-1) != chosen).sum())
            error = None
            if logprobs is not None:
                engine = torch.tensor([float(x) for x in logprobs], dtype=torch.float32,
                                      device=device)
                diff = (engine - chosen_logp).abs()
                error = float("inf") if not bool(torch.isfinite(diff).all()) else float(
                    diff.max())
            scores.append(SequenceScore(
                tokens=len(generated), max_regret=float(regret.max()),
                mean_regret=float(regret.mean()), max_logprob_error=error,
                mismatches=mismatches))
    return scores


@contextlib.contextmanager
def _full_fp32_matmuls() -> Iterator[None]:
    """FP32 matmuls in full precision (no TF32) while scoring, whatever the process set."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def summarize(scores: Sequence[SequenceScore]) -> dict[str, Any]:
    """The scores of many sequences as one record (mean regret weighted by tokens)."""
    tokens = sum(s.tokens for s in scores)
    errors = [s.max_logprob_error for s in scores if s.max_logprob_error is not None]
    return {
        "sequences": len(scores),
        "tokens": tokens,
        "max_regret": max((s.max_regret for s in scores), default=0.0),
        "mean_regret": (sum(s.mean_regret * s.tokens for s in scores) / tokens) if tokens else 0.0,
        "max_logprob_error": max(errors) if errors else None,
        "mismatches": sum(s.mismatches for s in scores),
    }


# --------------------------------------------------------------------------- operator level

TOLERANCES: dict[str, tuple[float, float]] = {
    "rms_norm": (2**-6, 2**-6),
    "fused_add_rms_norm": (2**-6, 2**-6),
    "silu_and_mul": (2**-6, 2**-6),
    "rotary": (2**-6, 2**-6),
    "attention_prefill": (2**-4, 2**-4),
    "attention_decode": (2**-4, 2**-4),
    "kv_write": (0.0, 0.0),
}
"""Entrypoint -> (rtol, atol relative to the row's RMS); see the module's docstring."""

SMALL_ROW_SCALE = 1e-3
ROPE_TABLE_LEN = 2048


@attrs.frozen
class OperatorCase:
    """One input set for one entrypoint: positional arguments (CPU tensors and numbers)."""

    entrypoint: str
    name: str
    args: tuple[Any, ...]

    def fresh_args(self, device: Any = "cpu") -> list[Any]:
        """Copies of the arguments on ``device`` (an in-place kernel writes into its own)."""
        import torch

        return [a.clone().to(device) if isinstance(a, torch.Tensor) else a for a in self.args]


@attrs.frozen
class OperatorVerdict:
    passed: bool
    message: str
    worst: float
    """The largest error in units of the tolerance (<= 1 passes; inf for a malformed output)."""


def _seed_for(entrypoint: str, seed: int) -> int:
    """A generator seed per (entrypoint, seed), for any int seed (a held-out one may be large)."""
    digest = hashlib.sha256(f"aka-e2e-operator:{seed}:{entrypoint}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def operator_cases(entrypoint: str, config: ModelConfig, seed: int) -> list[OperatorCase]:
    """The oracle's input sets for ``entrypoint`` in ``config``'s shapes (deterministic)."""
    import torch

    if entrypoint not in ENTRYPOINTS:
        raise KeyError(f"unknown entrypoint {entrypoint!r}; choose one of "
                       f"{', '.join(ENTRYPOINTS)}")
    gen = torch.Generator().manual_seed(_seed_for(entrypoint, seed))
    bf16 = torch.bfloat16
    c = config

    def randn(*shape: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * scale + shift).to(bf16)

    def small_rows(x: torch.Tensor, every: int = 3) -> torch.Tensor:
        x = x.float().clone()
        x[::every] *= SMALL_ROW_SCALE
        return x.to(bf16)

    def norm_weight(n: int) -> torch.Tensor:
        return randn(n, scale=0.1, shift=1.0)

    cases: list[OperatorCase] = []

    def add(name: str, *args: Any) -> None:
        cases.append(OperatorCase(entrypoint, name, tuple(args)))

    h, d, hq, hk = c.hidden, c.head_dim, c.heads, c.kv_heads
    if entrypoint == "rms_norm":
        add("hidden_t1", randn(1, h), norm_weight(h), c.eps)
        add("hidden_t7", randn(7, h, scale=3.0), norm_weight(h), c.eps)
        add("hidden_t37_small_rows", small_rows(randn(37, h)), norm_weight(h), c.eps)
        add("q_heads_t5_small_rows", small_rows(randn(5 * hq, d), 2), norm_weight(d), c.eps)
        add("k_heads_t9", randn(9 * hk, d), norm_weight(d), c.eps)
    elif entrypoint == "fused_add_rms_norm":
        add("t1", randn(1, h), randn(1, h), norm_weight(h), c.eps)
        add("t7", randn(7, h), randn(7, h, scale=4.0), norm_weight(h), c.eps)
        add("t37_small_rows", small_rows(randn(37, h)), small_rows(randn(37, h)),
            norm_weight(h), c.eps)
    elif entrypoint == "silu_and_mul":
        for t in (1, 7, 37):
            add(f"t{t}", randn(t, 2 * c.intermediate, scale=3.0))
    elif entrypoint == "rotary":
        table = rope_table(c, ROPE_TABLE_LEN)
        for t in (1, 9, 37):
            positions = torch.randint(0, ROPE_TABLE_LEN, (t,), generator=gen)
            if t > 2:
                positions[0], positions[1], positions[2] = 0, 1, ROPE_TABLE_LEN - 1
            add(f"t{t}", randn(t, hq, d), randn(t, hk, d), positions, table)
    elif entrypoint == "attention_prefill":
        for t in (1, 9, 37):
            add(f"t{t}", randn(t, hq, d), randn(t, hk, d),
                randn(t, hk, d), d ** -0.5)
    elif entrypoint == "attention_decode":
        for name, seq_lens, length in (("b3_l67", [1, 30, 67], 67), ("b4_l33", [33, 2, 17, 9], 33)):
            b = len(seq_lens)
            k_cache = randn(b, length, hk, d)
            v_cache = randn(b, length, hk, d)
            beyond = torch.arange(length)[None, :] >= torch.tensor(seq_lens)[:, None]
            # Garbage (large, finite) where no query may look.
            k_cache[beyond] = randn(int(beyond.sum()), hk, d, scale=8.0, shift=4.0)
            v_cache[beyond] = randn(int(beyond.sum()), hk, d, scale=8.0, shift=4.0)
            add(name, randn(b, hq, d), k_cache, v_cache,
                torch.tensor(seq_lens, dtype=torch.int32), d ** -0.5)
    elif entrypoint == "kv_write":
        s, length = 4, 33
        for name, slots, positions in (
                ("prefill_t7_slot2", [2] * 7, list(range(7))),
                ("decode_t4_all_slots", [0, 1, 2, 3], [5, 0, 32, 11]),
                ("decode_t3", [3, 0, 1], [1, 31, 7])):
            t = len(slots)
            add(name, randn(t, hk, d), randn(t, hk, d), randn(s, length, hk, d),
                randn(s, length, hk, d), torch.tensor(slots, dtype=torch.int64),
                torch.tensor(positions, dtype=torch.int64))
    return cases


def reference_outputs(case: OperatorCase) -> list[torch.Tensor]:
    """The FP32 reference's outputs of a case (float32; for kv_write, the caches after)."""
    import torch

    from aka_backend_e2e.kernels_api import call_for_check

    args = case.fresh_args()
    if case.entrypoint in IN_PLACE_OUTPUTS:
        for i in IN_PLACE_OUTPUTS[case.entrypoint]:
            args[i] = args[i].float()
    with torch.no_grad():
        return [t.float() for t in call_for_check(REFERENCE, case.entrypoint, args)]


def expected_dtype(case: OperatorCase) -> Any:
    """The dtype a kernel's outputs must have: that of its first tensor argument."""
    import torch

    first = next(a for a in case.args if isinstance(a, torch.Tensor))
    return first.dtype


def compare_outputs(case: OperatorCase, expected: Sequence[torch.Tensor],
                    actual: Sequence[torch.Tensor]) -> OperatorVerdict:
    """Whether ``actual`` (the kernel's outputs) matches the FP32 reference within the
    entrypoint's tolerances (see the module's docstring)."""
    import torch

    def fail(message: str) -> OperatorVerdict:
        return OperatorVerdict(False, f"{case.entrypoint}[{case.name}]: {message}", math.inf)

    if len(actual) != len(expected):
        return fail(f"{len(actual)} outputs, expected {len(expected)}")
    rtol, atol = TOLERANCES[case.entrypoint]
    dtype = expected_dtype(case)
    worst, where = 0.0, ""
    for i, (ref, out) in enumerate(zip(expected, actual, strict=True)):
        if tuple(out.shape) != tuple(ref.shape):
            return fail(f"output {i} has shape {list(out.shape)}, expected {list(ref.shape)}")
        if out.dtype != dtype:
            return fail(f"output {i} has dtype {out.dtype}, expected {dtype}")
        got = out.detach().to("cpu").float()
        if not bool(torch.isfinite(got).all()):
            return fail(f"output {i} has non-finite values")
        if ref.numel() == 0:
            continue
        row_rms = ref.pow(2).mean(-1, keepdim=True).sqrt()
        bound = rtol * ref.abs() + atol * row_rms
        err = (got - ref).abs()
        if rtol == 0.0 and atol == 0.0:
            ratio = torch.where(err > 0, torch.full_like(err, math.inf), torch.zeros_like(err))
        else:
            ratio = err / bound.clamp_min(torch.finfo(torch.float32).tiny)
        value = float(ratio.max())
        if value > worst:
            worst = value
            flat = int(ratio.argmax())
            where = (f"output {i} at {[int(j) for j in torch.unravel_index(torch.tensor(flat), ref.shape)]}"
                     f": {float(got.flatten()[flat]):.6g} vs reference "
                     f"{float(ref.flatten()[flat]):.6g}")
    if worst > 1.0:
        return OperatorVerdict(False, f"{case.entrypoint}[{case.name}]: outside the tolerance "
                                      f"(rtol {rtol:g}, atol {atol:g} x row RMS) by "
                                      f"{worst:.3g}x; worst {where}", worst)
    return OperatorVerdict(True, f"{case.entrypoint}[{case.name}]: within {worst:.3g} of the "
                                 "tolerance", worst)


def check_kernels_locally(kernels: KernelSet, config: ModelConfig, seed: int,
                          entrypoints: Sequence[str] | None = None,
                          device: Any = "cpu") -> list[OperatorVerdict]:
    """Run the operator oracle in this process (tests; the judge sends each case to the
    engine's ``check`` instead). A kernel that raises fails its case."""
    import torch

    from aka_backend_e2e.kernels_api import call_for_check

    verdicts = []
    for name in entrypoints or list(ENTRYPOINTS):
        for case in operator_cases(name, config, seed):
            try:
                with torch.no_grad():
                    actual = call_for_check(kernels, name, case.fresh_args(device))
            except Exception as exc:  # the kernel's own failure is the case's failure
                verdicts.append(OperatorVerdict(False, f"{name}[{case.name}]: raised "
                                                       f"{type(exc).__name__}: {exc}", math.inf))
                continue
            verdicts.append(compare_outputs(case, reference_outputs(case), actual))
    return verdicts

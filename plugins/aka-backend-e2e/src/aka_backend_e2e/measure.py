"""How a case is measured: alternating pairs of fresh engine runs, count checks on every run, and
the statistics the score comes from.

The work is fixed: the same prompt and output lengths (drawn from the case's seed) in every run,
``ignore_eos`` so every request generates exactly ``max_tokens`` tokens; the prompts' tokens are
drawn from the evaluation's secret (the same for both arms, unknown to the candidate ahead). The
judge's client keeps at most the case's ``max_concurrency`` requests in flight. One run is one fresh
engine (warm-up requests, then the timed requests); one pair is a baseline run and a candidate
run, in an order that alternates (pair 0: baseline then candidate, pair 1: candidate then
baseline, ...) so slow drift of the machine falls on both arms alike.

* throughput of a run = output tokens / (last completion - first send), judge's clock;
* ratio of a pair = candidate throughput / baseline throughput (> 1: the candidate is faster);
* a case's result = the median of its pairs' ratios, with a seeded percentile-bootstrap 95% CI;
* the noise floor: pairs are added (up to ``max_pairs``) while the *spread* of the paired ratios,
  the relative half-width of their bootstrap CI ``(hi - lo) / 2 / median``, is above ``aa_floor``:
  the spread a comparison of the baseline with itself (A/A) may show. With the measurement that
  quiet, a ratio outside 1 +- aa_floor is the candidate's doing, not noise. The baseline's own
  run-to-run ratios (``aa_ratios``: each pair's baseline throughput over the previous pair's)
  are reported beside it;
* over cases: the geometric mean of the case medians, its CI from a bootstrap that resamples the
  pairs of every case (seeded);
* p99 TPOT per arm over every timed request of the case (a gate when the case sets a limit).

Everything but ``run_case`` is a pure function of numbers or ``RunResult``s.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from aka_backend_e2e.adapters.base import (
    CountCheckFailed,
    EngineAdapter,
    Request,
    RunResult,
    RunSpec,
)

RESAMPLES = 2000
CI_LEVEL = 0.95
MAX_VIOLATIONS_SHOWN = 6


# --------------------------------------------------------------------------- the fixed work


def prompt_tokens(prompt_key: str, kind: str, index: int, length: int,
                  vocab_size: int) -> tuple[int, ...]:
    """The prompt of request ``index`` of ``kind`` (``warmup``, ``req``, ``check``): ``length``
    token ids uniform in ``[0, vocab_size)``, from a generator of its own seeded with a sha256 of
    the evaluation's secret ``prompt_key``. Prompts of one request tell nothing of another's, nor
    of the key (a generator's state, which a long enough prompt may give away, is only a hash)."""
    digest = hashlib.sha256(f"aka-e2e-prompt:{prompt_key}:{kind}:{index}".encode()).digest()
    rng = random.Random(int.from_bytes(digest, "little"))
    return tuple(rng.randrange(vocab_size) for _ in range(length))


def case_requests(case: Any, vocab_size: int, *, prompt_key: str,
                  warmup: bool = False) -> list[Request]:
    """The case's requests (``warmup``: its warm-up requests). Their lengths come from the case's
    seed (uniform within the case's bounds, both ends included), so the amount of work is the
    same in every evaluation; their prompt tokens come from ``prompt_key``, the evaluation's
    secret (``prompt_tokens``), so that a candidate who knows the weights and the workload cannot
    compute the greedy outputs ahead and emit them without computing. Both arms of an evaluation
    get the same requests."""
    count = case.warmup_requests if warmup else case.requests
    rng = random.Random(f"aka-e2e:{case.seed}:{'warmup' if warmup else 'timed'}")
    kind = "warmup" if warmup else "req"
    requests = []
    for index in range(count):
        input_len = rng.randint(*case.input_len)
        output_len = rng.randint(*case.output_len)
        prompt = prompt_tokens(prompt_key, f"{case.name}:{kind}", index, input_len, vocab_size)
        requests.append(Request(id=f"{kind}-{index}", prompt=prompt, max_tokens=output_len))
    return requests


def arrival_offsets(count: int, rate: float, seed: int) -> list[float]:
    """When each request is sent, in seconds after the first: all at 0 for an infinite rate,
    else a Poisson process of ``rate`` per second (exponential gaps drawn from ``seed``)."""
    if math.isinf(rate):
        return [0.0] * count
    if rate <= 0:
        raise ValueError(f"request rate must be positive, got {rate}")
    rng = random.Random(f"aka-e2e-arrivals:{seed}")
    offsets, at = [], 0.0
    for index in range(count):
        if index:
            at += rng.expovariate(rate)
        offsets.append(at)
    return offsets


def pair_order(index: int) -> tuple[str, str]:
    """The arms of pair ``index`` in the order they run: alternating."""
    return ("baseline", "candidate") if index % 2 == 0 else ("candidate", "baseline")


# --------------------------------------------------------------------------- count checks


def max_in_flight(result: RunResult) -> int:
    """The most requests the judge had in flight at once (sent and not yet completed), by its
    own timestamps; a request never completed stays in flight. A completion read at the very
    instant of a send counts first (the judge sends the next request after reading it)."""
    events: list[tuple[float, int]] = []
    for r in result.requests.values():
        if r.sent is None:
            continue
        events.append((r.sent, 1))
        events.append((r.completed if r.completed is not None else math.inf, -1))
    most = current = 0
    for _, change in sorted(events):
        current += change
        most = max(most, current)
    return most


def count_violations(result: RunResult, requests: Sequence[Request],
                     max_concurrency: int | None = None) -> list[str]:
    """Every way ``result`` is impossible for the fixed work ``requests`` (empty: it is sound).

    Requests: every one sent and completed, none unknown. Tokens: exactly ``max_tokens`` per
    request (ignore_eos), one logprob (finite, <= 0) and one arrival time per token. Time: sent
    <= first token <= ... <= last token <= completion, all within the run's window (``start``
    .. ``end``), which is at least every request's latency; a request with tokens took time; the
    timed duration (last completion - first send) is positive. Concurrency (``max_concurrency``
    given): the judge never had more requests in flight than that (``max_in_flight``: its client
    sends a request only while fewer are; the engine's own slots are not trusted).
    """
    found: list[str] = []
    wanted = {r.id: r for r in requests}
    unknown = sorted(set(result.requests) - set(wanted))
    missing = sorted(set(wanted) - set(result.requests))
    if unknown:
        found.append(f"results for requests never sent: {_some(unknown)}")
    if missing:
        found.append(f"no result for requests {_some(missing)}")
    if result.sent != len(requests):
        found.append(f"{result.sent} of {len(requests)} requests sent")
    if result.completed != result.sent:
        failed = sorted(r.id for r in result.requests.values() if r.completed is None)
        errors = sorted({r.error for r in result.requests.values() if r.error})
        found.append(f"{result.completed} of {result.sent} requests completed (not completed: "
                     f"{_some(failed)}" + (f"; errors: {_some(errors)}" if errors else "") + ")")
    expected = sum(r.max_tokens for r in requests)
    if result.tokens_received != expected:
        found.append(f"{result.tokens_received} tokens received, {expected} expected (ignore_eos: "
                     "every request generates exactly max_tokens)")
    wrong_len, ragged, bad_logprob, order = [], [], [], []
    for rid, got in sorted(result.requests.items()):
        want = wanted.get(rid)
        if want is not None and len(got.tokens) != want.max_tokens:
            wrong_len.append(f"{rid} ({len(got.tokens)} of {want.max_tokens})")
        if not len(got.tokens) == len(got.logprobs) == len(got.token_times):
            ragged.append(rid)
        if any(not (isinstance(lp, float | int) and math.isfinite(lp) and lp <= 1e-3)
               for lp in got.logprobs):
            bad_logprob.append(rid)
        if got.sent is None:
            continue
        times = got.token_times
        if any(b < a for a, b in itertools.pairwise(times)):
            order.append(f"{rid}: token times go backwards")
        if times and times[0] < got.sent:
            order.append(f"{rid}: first token before the request was sent")
        if got.completed is not None:
            if got.completed < got.sent:
                order.append(f"{rid}: completed before it was sent")
            if times and got.completed < times[-1]:
                order.append(f"{rid}: completed before its last token")
            if got.completed > result.end:
                order.append(f"{rid}: completed after the run ended")
        if got.sent < result.start:
            order.append(f"{rid}: sent before the run started")
    if wrong_len:
        found.append(f"requests with another number of tokens than max_tokens: {_some(wrong_len)}")
    if ragged:
        found.append(f"tokens, logprobs and arrival times differ in number: {_some(ragged)}")
    if bad_logprob:
        found.append(f"logprobs that are not finite numbers <= 0: {_some(bad_logprob)}")
    if order:
        found.append(f"impossible times: {_some(order)}")
    window = result.end - result.start
    done = [r for r in result.requests.values() if r.sent is not None and r.completed is not None]
    for r in done:
        latency = r.completed - r.sent  # type: ignore[operator]
        if latency > window:
            found.append(f"request {r.id} took {latency:.6f} s, longer than the run "
                         f"({window:.6f} s from first send to last line)")
            break
    stalled = sorted(r.id for r in done if r.tokens and not r.completed > r.sent)  # type: ignore[operator]
    if stalled:
        found.append(f"requests that produced tokens in no time: {_some(stalled)}")
    if max_concurrency is not None and (most := max_in_flight(result)) > max_concurrency:
        found.append(f"{most} requests were in flight at once, more than the case's "
                     f"max_concurrency {max_concurrency}")
    if done and not run_duration(result) > 0:
        found.append(f"run duration {run_duration(result):.6f} s is not positive (tokens per "
                     "second undefined)")
    return found


def check_counts(result: RunResult, requests: Sequence[Request], *, phase: str = "timing",
                 max_concurrency: int | None = None) -> None:
    """Raise ``CountCheckFailed`` (the fault of ``result.arm``) when ``count_violations`` finds
    anything."""
    found = count_violations(result, requests, max_concurrency)
    if found:
        raise CountCheckFailed(found, arm=result.arm, phase=phase)


def _some(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_VIOLATIONS_SHOWN])
    return shown + (f" (and {len(items) - MAX_VIOLATIONS_SHOWN} more)"
                    if len(items) > MAX_VIOLATIONS_SHOWN else "")


# --------------------------------------------------------------------------- per run


def run_duration(result: RunResult) -> float:
    """Last completion - first send (seconds, judge's clock)."""
    done = [r for r in result.requests.values() if r.sent is not None and r.completed is not None]
    if not done:
        return math.nan
    return max(r.completed for r in done) - min(r.sent for r in done)  # type: ignore[type-var]


def throughput(result: RunResult) -> float:
    """Output tokens per second of the run."""
    return result.tokens_received / run_duration(result)


def tpot_ms(result: RunResult) -> list[float]:
    """Time per output token of each request (ms): (completion - first token) / (tokens - 1);
    requests of one token have none."""
    out = []
    for r in sorted(result.requests.values(), key=lambda r: r.id):
        if r.completed is not None and len(r.tokens) > 1:
            out.append(1000.0 * (r.completed - r.token_times[0]) / (len(r.tokens) - 1))
    return out


def ttft_ms(result: RunResult) -> list[float]:
    """Time to first token of each request (ms): first token - send."""
    return [1000.0 * (r.token_times[0] - r.sent)
            for r in sorted(result.requests.values(), key=lambda r: r.id)
            if r.sent is not None and r.token_times]


@attrs.frozen
class RunSample:
    """The numbers kept of one timed run (raw samples of the record)."""

    arm: str
    pair: int
    position: int
    """0: the pair's first run, 1: its second."""
    throughput: float
    duration_s: float
    tokens: int
    requests: int
    ttft_ms: tuple[float, ...] = attrs.field(converter=tuple)
    tpot_ms: tuple[float, ...] = attrs.field(converter=tuple)
    wall_start: float = 0.0
    """``time.time()`` when the run was started (to place it on a timeline)."""

    @classmethod
    def of(cls, result: RunResult, pair: int, position: int, wall_start: float = 0.0
           ) -> RunSample:
        return cls(arm=result.arm, pair=pair, position=position, throughput=throughput(result),
                   duration_s=run_duration(result), tokens=result.tokens_received,
                   requests=result.completed, ttft_ms=ttft_ms(result), tpot_ms=tpot_ms(result),
                   wall_start=wall_start)

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["ttft_ms"] = [round(x, 4) for x in self.ttft_ms]
        data["tpot_ms"] = [round(x, 4) for x in self.tpot_ms]
        return data


@attrs.frozen
class PairSample:
    index: int
    baseline: RunSample
    candidate: RunSample

    @property
    def order(self) -> tuple[str, str]:
        return pair_order(self.index)

    @property
    def ratio(self) -> float:
        """Candidate throughput / baseline throughput."""
        return self.candidate.throughput / self.baseline.throughput

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "order": list(self.order), "ratio": self.ratio,
                "baseline": self.baseline.to_json(), "candidate": self.candidate.to_json()}


# --------------------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def bootstrap_ci(samples: Sequence[float], *, seed: int,
                 statistic: Callable[[Sequence[float]], float] = median,
                 resamples: int = RESAMPLES, level: float = CI_LEVEL) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over ``samples``, seeded (the same samples and
    seed give the same interval)."""
    rng = random.Random(seed)
    n = len(samples)
    stats = [statistic([samples[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    tail = (1.0 - level) / 2.0 * 100.0
    return percentile(stats, tail), percentile(stats, 100.0 - tail)


def spread(ratios: Sequence[float], *, seed: int) -> float:
    """The relative half-width of the ratios' bootstrap CI of the median (the noise floor the
    measurement has reached): ``(hi - lo) / 2 / median``."""
    lo, hi = bootstrap_ci(ratios, seed=seed)
    return (hi - lo) / 2.0 / median(ratios)


def needs_more_pairs(ratios: Sequence[float], *, min_pairs: int, max_pairs: int,
                     aa_floor: float, seed: int) -> bool:
    """Another pair is run while fewer than ``min_pairs`` ran, or while the spread is above
    ``aa_floor`` and fewer than ``max_pairs`` ran."""
    if len(ratios) < min_pairs:
        return True
    if len(ratios) >= max_pairs:
        return False
    return spread(ratios, seed=seed) > aa_floor


@attrs.frozen
class CaseResult:
    """One case's measurement: its pairs (raw samples) and what they give."""

    case: str
    pairs: tuple[PairSample, ...] = attrs.field(converter=tuple)
    ratio: float
    """The median paired ratio (candidate throughput / baseline throughput)."""
    ci95: tuple[float, float]
    spread: float
    aa_floor: float
    aa_ratios: tuple[float, ...] = attrs.field(converter=tuple)
    """The baseline against itself: each pair's baseline throughput / the previous pair's."""
    stopped: str
    """Why no further pair ran: ``floor`` (spread <= aa_floor), ``max_pairs`` or ``time``."""
    baseline_ms_per_token: float
    """1000 / the median baseline throughput (the case's "time": speedup = baseline/candidate)."""
    candidate_ms_per_token: float
    tpot: dict[str, Any]
    """p99 TPOT per arm (ms) and the gate: ``{"baseline_p99_ms", "candidate_p99_ms",
    "limit_ms", "passed"}`` (``passed`` is None without a limit)."""

    @property
    def ratios(self) -> list[float]:
        return [p.ratio for p in self.pairs]

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "ratio": self.ratio, "ci95": list(self.ci95),
                "spread": self.spread, "aa_floor": self.aa_floor,
                "aa_ratios": list(self.aa_ratios), "stopped": self.stopped,
                "baseline_ms_per_token": self.baseline_ms_per_token,
                "candidate_ms_per_token": self.candidate_ms_per_token, "tpot": self.tpot,
                "pairs": [p.to_json() for p in self.pairs]}


def tpot_gate(pairs: Sequence[PairSample], limit_ms: float | None) -> dict[str, Any]:
    """p99 TPOT of each arm over every request of the case's timed runs, and whether the
    candidate's is within ``limit_ms`` (None: no limit)."""
    base = [x for p in pairs for x in p.baseline.tpot_ms]
    cand = [x for p in pairs for x in p.candidate.tpot_ms]
    cand_p99 = percentile(cand, 99)
    return {"baseline_p99_ms": percentile(base, 99), "candidate_p99_ms": cand_p99,
            "limit_ms": limit_ms,
            "passed": None if limit_ms is None else bool(cand_p99 <= limit_ms)}


def summarize_case(name: str, pairs: Sequence[PairSample], *, aa_floor: float, seed: int,
                   stopped: str, tpot_limit_ms: float | None = None) -> CaseResult:
    ratios = [p.ratio for p in pairs]
    base = [p.baseline.throughput for p in pairs]
    cand = [p.candidate.throughput for p in pairs]
    return CaseResult(
        case=name, pairs=tuple(pairs), ratio=median(ratios), ci95=bootstrap_ci(ratios, seed=seed),
        spread=spread(ratios, seed=seed), aa_floor=aa_floor,
        aa_ratios=tuple(b / a for a, b in itertools.pairwise(base)), stopped=stopped,
        baseline_ms_per_token=1000.0 / median(base), candidate_ms_per_token=1000.0 / median(cand),
        tpot=tpot_gate(pairs, tpot_limit_ms))


@attrs.frozen
class Summary:
    """Over cases: the geometric mean of the case ratios (the speedup) and its CI."""

    speedup: float
    ci95: tuple[float, float]
    cases: tuple[CaseResult, ...] = attrs.field(converter=tuple)

    @property
    def tpot_passed(self) -> bool:
        return all(c.tpot["passed"] is not False for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {"speedup": self.speedup, "ci95": list(self.ci95),
                "tpot_passed": self.tpot_passed, "cases": [c.to_json() for c in self.cases]}


def summarize_cases(cases: Sequence[CaseResult], *, seed: int,
                    resamples: int = RESAMPLES, level: float = CI_LEVEL) -> Summary:
    """Geometric mean of the cases' median ratios; its CI resamples the pairs within every case
    (the cases are fixed), seeded."""
    rng = random.Random(seed)
    per_case = [c.ratios for c in cases]
    stats = []
    for _ in range(resamples):
        medians = [median([r[rng.randrange(len(r))] for _ in r]) for r in per_case]
        stats.append(geomean(medians))
    tail = (1.0 - level) / 2.0 * 100.0
    return Summary(speedup=geomean([c.ratio for c in cases]),
                   ci95=(percentile(stats, tail), percentile(stats, 100.0 - tail)), cases=cases)


# --------------------------------------------------------------------------- running a case

OnRun = Callable[[str, int, Sequence[Request], RunResult], None]
"""Called after every timed run (arm, pair index, the requests, the result), e.g. to audit the
tokens; raising stops the measurement."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection in the judge's process while it times a run: its reader thread
    timestamps every line and its client sends the next request when one is done, so a
    collection pass would delay both. Collected once the run is over."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()


def timed_run(adapter: EngineAdapter, spec: RunSpec, case: Any, arm: str, pair: int,
              requests: Sequence[Request], warmup: Sequence[Request]) -> RunResult:
    """One fresh engine for ``arm``: warm-up requests (all due at once), then the timed requests
    at the case's rate, never more than the case's ``max_concurrency`` in flight (the judge's
    client holds the rest back); count checks on both; the engine is stopped whatever happens."""
    log_dir = spec.log_dir / case.name / f"pair{pair}-{arm}"
    limit = int(case.max_concurrency)
    run = adapter.start(arm, spec.tree(arm), spec.workload, case, log_dir)
    try:
        if warmup:
            check_counts(run.generate(warmup, math.inf, max_concurrency=limit), warmup,
                         phase="warmup", max_concurrency=limit)
        with collector_paused():
            result = run.generate(requests, case.request_rate, seed=case.seed,
                                  max_concurrency=limit)
    finally:
        run.stop()
    check_counts(result, requests, max_concurrency=limit)
    return result


def run_case(adapter: EngineAdapter, spec: RunSpec, case: Any, *, min_pairs: int,
             max_pairs: int, aa_floor: float, vocab_size: int, prompt_key: str, seed: int = 0,
             deadline: float | None = None, on_run: OnRun | None = None) -> CaseResult:
    """Measure ``case``: alternating pairs of fresh runs until the spread is at most
    ``aa_floor`` (at least ``min_pairs``, at most ``max_pairs``; no new pair after ``deadline``,
    a ``time.monotonic()`` value, once ``min_pairs`` ran). Every run serves the same requests,
    their prompts drawn from ``prompt_key`` (the evaluation's secret). Engine failures propagate
    (``EngineFailure``: whose fault is in its arm)."""
    requests = case_requests(case, vocab_size, prompt_key=prompt_key)
    warmup = case_requests(case, vocab_size, prompt_key=prompt_key, warmup=True)
    pairs: list[PairSample] = []
    stopped = "max_pairs"
    while True:
        ratios = [p.ratio for p in pairs]
        if not needs_more_pairs(ratios, min_pairs=min_pairs, max_pairs=max_pairs,
                                aa_floor=aa_floor, seed=seed):
            stopped = "max_pairs" if len(pairs) >= max_pairs else "floor"
            break
        if deadline is not None and len(pairs) >= min_pairs and time.monotonic() > deadline:
            stopped = "time"
            break
        index = len(pairs)
        samples: dict[str, RunSample] = {}
        for position, arm in enumerate(pair_order(index)):
            wall = time.time()
            result = timed_run(adapter, spec, case, arm, index, requests, warmup)
            if on_run is not None:
                on_run(arm, index, requests, result)
            samples[arm] = RunSample.of(result, index, position, wall)
        pairs.append(PairSample(index=index, baseline=samples["baseline"],
                                candidate=samples["candidate"]))
    return summarize_case(case.name, pairs, aa_floor=aa_floor, seed=seed, stopped=stopped,
                          tpot_limit_ms=case.p99_tpot_ms)

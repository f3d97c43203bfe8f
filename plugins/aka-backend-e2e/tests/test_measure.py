"""measure.py: the statistics on hand-computed examples, every count check, and run_case's pair
loop against an in-process fake engine."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import pytest
from aka_backend_e2e import measure
from aka_backend_e2e.adapters.base import (
    CountCheckFailed,
    EngineCrashed,
    Request,
    RequestResult,
    RunResult,
    RunSpec,
)


def result(arm: str = "candidate", **requests: tuple[float, list[float], float | None]
           ) -> RunResult:
    """A run from ``id=(sent, token_times, completed)``; tokens 1, 2, ...; logprob -0.5."""
    out = {}
    for rid, (sent, times, completed) in requests.items():
        r = RequestResult(id=rid, expected_tokens=len(times), sent=sent, completed=completed)
        for k, t in enumerate(times):
            r.add(k + 1, -0.5, t)
        out[rid] = r
    ends = [c for _, _, c in requests.values() if c is not None]
    return RunResult(arm=arm, requests=out, start=min(s for s, _, _ in requests.values()),
                     end=max(ends) if ends else 0.0)


def good() -> tuple[RunResult, list[Request]]:
    run = result(a=(0.0, [0.1, 0.2, 0.3, 0.4], 0.4), b=(0.0, [0.2, 0.3, 0.4, 0.5], 0.5))
    reqs = [Request(id="a", prompt=(1, 2), max_tokens=4), Request(id="b", prompt=(3,), max_tokens=4)]
    return run, reqs


# --------------------------------------------------------------------------- per run numbers


def test_throughput_tpot_ttft_by_hand():
    run, _ = good()
    # 8 tokens from the first send (0.0) to the last completion (0.5): 16 tokens/s.
    assert measure.run_duration(run) == pytest.approx(0.5)
    assert measure.throughput(run) == pytest.approx(16.0)
    # a: (0.4 - 0.1) / 3 = 0.1 s; b: (0.5 - 0.2) / 3 = 0.1 s.
    assert measure.tpot_ms(run) == pytest.approx([100.0, 100.0])
    assert measure.ttft_ms(run) == pytest.approx([100.0, 200.0])


def test_percentile_median_geomean_by_hand():
    assert measure.percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    assert measure.percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)  # 3 + 0.97 * (4 - 3)
    assert measure.percentile([7], 99) == 7
    assert math.isnan(measure.percentile([], 99))
    assert measure.median([3.0, 1.0, 2.0]) == 2.0
    assert measure.geomean([2.0, 8.0]) == pytest.approx(4.0)


def test_bootstrap_ci_by_hand():
    # Constant samples: every resample has the same median.
    assert measure.bootstrap_ci([1.5, 1.5, 1.5], seed=0) == (1.5, 1.5)
    # Three values a < b < c: a resample's median is a with probability 7/27 (two or three
    # draws of a), c likewise, b 13/27; both tails (2.5%) fall on a and c.
    assert measure.bootstrap_ci([1.0, 1.2, 1.1], seed=0) == (1.0, 1.2)
    # Seeded: the same samples and seed give the same interval.
    samples = [1.01, 0.98, 1.05, 1.02, 0.99, 1.03, 1.00]
    assert measure.bootstrap_ci(samples, seed=3) == measure.bootstrap_ci(samples, seed=3)
    lo, hi = measure.bootstrap_ci(samples, seed=3)
    assert min(samples) <= lo <= measure.median(samples) <= hi <= max(samples)


def test_spread_and_the_stopping_rule():
    assert measure.spread([1.0, 1.0, 1.0], seed=0) == 0.0
    # CI [0.9, 1.1] (see above), median 1.0: half-width 0.1, relative 0.1.
    assert measure.spread([0.9, 1.0, 1.1], seed=0) == pytest.approx(0.1)
    rule = {"min_pairs": 3, "max_pairs": 5, "aa_floor": 0.005, "seed": 0}
    assert measure.needs_more_pairs([], **rule)
    assert measure.needs_more_pairs([1.0, 1.0], **rule)  # below min_pairs
    assert not measure.needs_more_pairs([1.0, 1.0, 1.0], **rule)  # quiet: spread 0
    assert measure.needs_more_pairs([0.9, 1.0, 1.1], **rule)  # noisy: spread 0.1 > 0.005
    assert not measure.needs_more_pairs([0.9, 1.0, 1.1, 0.9, 1.1], **rule)  # max_pairs
    assert not measure.needs_more_pairs([0.999, 1.0, 1.001], **rule)  # spread 0.001


def test_pair_order_alternates():
    assert [measure.pair_order(i) for i in range(4)] == [
        ("baseline", "candidate"), ("candidate", "baseline"),
        ("baseline", "candidate"), ("candidate", "baseline")]


def sample(arm: str, pair: int, tput: float, tpot: list[float] = (10.0,)) -> measure.RunSample:
    return measure.RunSample(arm=arm, pair=pair, position=0, throughput=tput, duration_s=1.0,
                             tokens=int(tput), requests=1, ttft_ms=[1.0], tpot_ms=list(tpot))


def test_summarize_case_by_hand():
    pairs = [measure.PairSample(0, sample("baseline", 0, 100.0, [10, 10]),
                                sample("candidate", 0, 150.0, [6, 7])),
             measure.PairSample(1, sample("baseline", 1, 200.0, [10, 12]),
                                sample("candidate", 1, 200.0, [6, 8])),
             measure.PairSample(2, sample("baseline", 2, 100.0, [10, 10]),
                                sample("candidate", 2, 120.0, [6, 9]))]
    case = measure.summarize_case("c", pairs, aa_floor=0.005, seed=0, stopped="max_pairs",
                                  tpot_limit_ms=8.5)
    assert case.ratios == pytest.approx([1.5, 1.0, 1.2])
    assert case.ratio == pytest.approx(1.2)
    assert case.ci95 == pytest.approx((1.0, 1.5))
    assert case.spread == pytest.approx((1.5 - 1.0) / 2 / 1.2)
    assert case.aa_ratios == pytest.approx((2.0, 0.5))
    assert case.baseline_ms_per_token == pytest.approx(10.0)  # 1000 / median(100, 200, 100)
    assert case.candidate_ms_per_token == pytest.approx(1000 / 150)
    # p99 of [6, 7, 6, 8, 6, 9]: sorted [6, 6, 6, 7, 8, 9], position 4.95 -> 8.95 > 8.5
    assert case.tpot["candidate_p99_ms"] == pytest.approx(8.95)
    assert case.tpot["baseline_p99_ms"] == pytest.approx(11.9)
    assert case.tpot["passed"] is False
    no_limit = measure.summarize_case("c", pairs, aa_floor=0.005, seed=0, stopped="floor")
    assert no_limit.tpot["passed"] is None
    data = case.to_json()
    assert [p["order"] for p in data["pairs"]] == [["baseline", "candidate"],
                                                   ["candidate", "baseline"],
                                                   ["baseline", "candidate"]]
    assert data["pairs"][0]["baseline"]["tpot_ms"] == [10, 10]  # raw samples kept


def test_summarize_cases_geomean():
    def case(name: str, ratio: float) -> measure.CaseResult:
        pairs = [measure.PairSample(i, sample("baseline", i, 100.0),
                                    sample("candidate", i, 100.0 * ratio)) for i in range(3)]
        return measure.summarize_case(name, pairs, aa_floor=0.005, seed=0, stopped="floor")

    summary = measure.summarize_cases([case("a", 2.0), case("b", 8.0)], seed=0)
    assert summary.speedup == pytest.approx(4.0)
    assert summary.ci95 == pytest.approx((4.0, 4.0))
    assert summary.tpot_passed
    noisy = measure.summarize_case("n", [
        measure.PairSample(i, sample("baseline", i, 100.0), sample("candidate", i, t))
        for i, t in enumerate((100.0, 110.0, 120.0))], aa_floor=0.005, seed=0, stopped="x")
    mixed = measure.summarize_cases([case("a", 2.0), noisy], seed=1)
    assert mixed.speedup == pytest.approx(math.sqrt(2.0 * 1.1))
    # Resampling the noisy case's pairs moves its median over 1.0 .. 1.2.
    assert mixed.ci95 == pytest.approx((math.sqrt(2.0), math.sqrt(2.4)))


# --------------------------------------------------------------------------- count checks


def test_a_sound_run_passes():
    run, reqs = good()
    assert measure.count_violations(run, reqs) == []
    measure.check_counts(run, reqs)


def mutated(change) -> list[str]:
    run, reqs = good()
    change(run, reqs)
    return measure.count_violations(run, reqs)


def violation(change, fragment: str) -> None:
    found = mutated(change)
    assert any(fragment in v for v in found), found


def test_each_count_violation_is_detected():
    def not_sent(run, reqs):
        run.requests["b"].sent = None

    def not_completed(run, reqs):
        run.requests["b"].completed = None
        run.requests["b"].error = "RemoteProtocolError: peer closed connection"

    def short(run, reqs):
        for field in ("tokens", "logprobs", "token_times"):
            getattr(run.requests["a"], field).pop()

    def long(run, reqs):
        run.requests["a"].add(9, -0.1, 0.4)

    def unknown(run, reqs):
        run.requests["zz"] = RequestResult(id="zz", expected_tokens=0, sent=0.1, completed=0.2)

    def missing(run, reqs):
        reqs.append(Request(id="c", prompt=(1,), max_tokens=2))

    def ragged(run, reqs):
        run.requests["a"].logprobs.pop()

    def bad_logprob(run, reqs):
        run.requests["a"].logprobs[0] = float("nan")

    def positive_logprob(run, reqs):
        run.requests["a"].logprobs[0] = 0.7

    def backwards(run, reqs):
        run.requests["a"].token_times[2] = 0.15

    def before_sent(run, reqs):
        run.requests["b"].sent = 0.25
        run.start = 0.0

    def done_before_last(run, reqs):
        run.requests["b"].completed = 0.45
        run.requests["b"].token_times[-1] = 0.48

    def done_before_sent(run, reqs):
        run.requests["a"].completed = -0.1

    def after_end(run, reqs):
        run.end = 0.45

    def sent_before_start(run, reqs):
        run.start = 0.05

    def no_time(run, reqs):
        run.requests["a"].sent = 0.4
        run.requests["a"].token_times = [0.4] * 4

    def longer_than_run(run, reqs):
        run.start, run.end = 0.0, 0.3
        run.requests["a"].completed = 0.35

    violation(not_sent, "1 of 2 requests sent")
    violation(not_completed, "1 of 2 requests completed (not completed: b; errors: "
                             "RemoteProtocolError")
    violation(short, "7 tokens received, 8 expected")
    violation(short, "a (3 of 4)")
    violation(long, "9 tokens received, 8 expected")
    violation(unknown, "results for requests never sent: zz")
    violation(missing, "no result for requests c")
    violation(ragged, "differ in number: a")
    violation(bad_logprob, "not finite numbers <= 0: a")
    violation(positive_logprob, "not finite numbers <= 0: a")
    violation(backwards, "a: token times go backwards")
    violation(before_sent, "b: first token before the request was sent")
    violation(done_before_last, "b: completed before its last token")
    violation(done_before_sent, "a: completed before it was sent")
    violation(after_end, "b: completed after the run ended")
    violation(sent_before_start, "sent before the run started")
    violation(no_time, "tokens in no time: a")
    violation(longer_than_run, "took 0.350000 s, longer than the run")


def test_count_failure_blames_the_arm():
    run, reqs = good()
    run.requests["a"].tokens.pop()
    with pytest.raises(CountCheckFailed) as caught:
        measure.check_counts(run, reqs)
    assert caught.value.failure_kind == "timing_check"
    assert caught.value.to_failure()["kind"] == "timing_check"
    run.arm = "baseline"
    with pytest.raises(CountCheckFailed) as caught:
        measure.check_counts(run, reqs)
    assert caught.value.failure_kind == "infra_error"
    assert caught.value.to_failure()["retryable"] is True


# --------------------------------------------------------------------------- the fixed work


@attrs.frozen
class Case:
    name: str = "c"
    input_len: tuple[int, int] = (3, 6)
    output_len: tuple[int, int] = (2, 4)
    requests: int = 6
    max_concurrency: int = 4
    request_rate: float = math.inf
    seed: int = 1
    warmup_requests: int = 2
    p99_tpot_ms: float | None = None


def test_case_requests_are_fixed_and_within_bounds():
    a = measure.case_requests(Case(), 50, prompt_key="k")
    assert a == measure.case_requests(Case(), 50, prompt_key="k")
    assert a != measure.case_requests(Case(seed=2), 50, prompt_key="k")
    assert len(a) == 6 and len({r.id for r in a}) == 6
    assert all(3 <= len(r.prompt) <= 6 and 2 <= r.max_tokens <= 4 for r in a)
    assert all(0 <= t < 50 for r in a for t in r.prompt)
    warm = measure.case_requests(Case(), 50, prompt_key="k", warmup=True)
    assert len(warm) == 2 and not {r.id for r in warm} & {r.id for r in a}


def test_prompts_come_from_the_secret_and_lengths_from_the_case_seed():
    # What the agent sees (the case, its seed) fixes the amount of work, never the tokens: with
    # known weights, known prompts would let a candidate emit greedy outputs computed ahead.
    case = Case(input_len=(20, 40), requests=8)
    one = measure.case_requests(case, 50_000, prompt_key="secret-1")
    other = measure.case_requests(case, 50_000, prompt_key="secret-2")
    assert [(len(r.prompt), r.max_tokens) for r in one] == [
        (len(r.prompt), r.max_tokens) for r in other], "the same work in every evaluation"
    assert all(a.prompt != b.prompt for a, b in zip(one, other, strict=True))
    assert measure.case_requests(case, 50_000, prompt_key="secret-1") == one, "both arms alike"
    # One request's prompt says nothing of the next: each has a generator of its own.
    assert len({r.prompt[:10] for r in one}) == len(one)
    with pytest.raises(TypeError):
        measure.case_requests(case, 50_000)  # type: ignore[call-arg]  # no key, no prompts


def test_run_case_gives_every_run_the_same_secret_prompts_and_the_concurrency_limit(tmp_path):
    adapter = FakeAdapter({"baseline": [100.0] * 4, "candidate": [100.0] * 4})
    seen: list[list[Request]] = []
    measure.run_case(adapter, spec(tmp_path), Case(max_concurrency=3), min_pairs=2, max_pairs=2,
                     aa_floor=0.5, vocab_size=50, prompt_key="s3cret",
                     on_run=lambda arm, i, reqs, res: seen.append(list(reqs)))
    assert len(seen) == 4 and all(reqs == seen[0] for reqs in seen)
    assert seen[0] == measure.case_requests(Case(), 50, prompt_key="s3cret")
    assert adapter.limits == [3] * 8, "warm-up and timed generates, every run"


def test_requests_in_flight_by_the_judges_clock():
    # a: [0, 1), b: [0, 2), c sent at 1.0 when a completed at 1.0: never more than 2 at once.
    run = result(a=(0.0, [0.5], 1.0), b=(0.0, [1.5], 2.0), c=(1.0, [1.5], 2.5))
    reqs = [Request(id=i, prompt=(1,), max_tokens=1) for i in "abc"]
    assert measure.max_in_flight(run) == 2
    assert measure.count_violations(run, reqs, max_concurrency=2) == []
    found = measure.count_violations(run, reqs, max_concurrency=1)
    assert any("2 requests were in flight at once" in v for v in found), found
    # A request never completed stays in flight.
    hung = result(a=(0.0, [0.5], None), b=(1.0, [1.5], 2.0))
    assert measure.max_in_flight(hung) == 2


def test_arrival_offsets():
    assert measure.arrival_offsets(3, math.inf, 0) == [0.0, 0.0, 0.0]
    offsets = measure.arrival_offsets(4000, 100.0, 5)
    assert offsets == measure.arrival_offsets(4000, 100.0, 5)
    assert offsets[0] == 0.0 and offsets == sorted(offsets)
    assert offsets[-1] / 3999 == pytest.approx(0.01, rel=0.1)  # mean gap 1 / rate
    with pytest.raises(ValueError):
        measure.arrival_offsets(2, 0.0, 0)


# --------------------------------------------------------------------------- run_case


class FakeRun:
    def __init__(self, adapter: FakeAdapter, arm: str, speed: float):
        self.arm, self.adapter, self.speed = arm, adapter, speed

    def generate(self, requests, rate, *, seed=0, max_concurrency=None):
        self.adapter.limits.append(max_concurrency)
        t0 = self.adapter.clock
        limit = max_concurrency or len(requests)
        out = {}
        free = [t0] * limit  # when each of the client's places is free again
        for req in requests:
            place = min(range(limit), key=free.__getitem__)
            sent = free[place]
            r = RequestResult(id=req.id, expected_tokens=req.max_tokens, sent=sent)
            n = req.max_tokens - (1 if self.adapter.short == self.arm else 0)
            for k in range(n):
                r.add(k, -0.1, sent + (k + 1) / self.speed)
            r.completed = free[place] = sent + n / self.speed + 1e-6
            out[req.id] = r
        end = max(r.completed for r in out.values())
        self.adapter.clock = end + 1.0
        return RunResult(arm=self.arm, requests=out, start=t0, end=end)

    def stop(self):
        self.adapter.stopped += 1


class FakeAdapter:
    name = "fake"

    def __init__(self, speeds: dict[str, list[float]], short: str | None = None,
                 crash_at: int | None = None):
        self.speeds = {arm: list(v) for arm, v in speeds.items()}
        self.short = short
        self.crash_at = crash_at
        self.started: list[tuple[str, Path]] = []
        self.stopped = 0
        self.clock = 100.0
        self.limits: list[int | None] = []

    def start(self, arm, kernels_dir, workload, case, log_dir):
        self.started.append((arm, Path(log_dir)))
        if self.crash_at is not None and len(self.started) == self.crash_at:
            raise EngineCrashed("exited", arm=arm, phase="load")
        return FakeRun(self, arm, self.speeds[arm].pop(0))


def spec(tmp_path: Path) -> RunSpec:
    return RunSpec(workload=None, kernels={"baseline": tmp_path / "b", "candidate": tmp_path / "c"},
                   log_dir=tmp_path / "logs")


def test_run_case_stops_at_min_pairs_when_quiet(tmp_path):
    adapter = FakeAdapter({"baseline": [100.0] * 8, "candidate": [150.0] * 8})
    seen = []
    case = measure.run_case(adapter, spec(tmp_path), Case(), min_pairs=3, max_pairs=8,
                            aa_floor=0.005, vocab_size=50, prompt_key="k",
                            on_run=lambda arm, i, reqs, res: seen.append((arm, i, len(reqs))))
    assert [arm for arm, _ in adapter.started] == ["baseline", "candidate", "candidate",
                                                   "baseline", "baseline", "candidate"]
    assert adapter.stopped == 6  # a fresh engine per run, each stopped
    assert seen == [("baseline", 0, 6), ("candidate", 0, 6), ("candidate", 1, 6),
                    ("baseline", 1, 6), ("baseline", 2, 6), ("candidate", 2, 6)]
    assert case.stopped == "floor" and len(case.pairs) == 3
    assert case.ratio == pytest.approx(1.5, rel=1e-3)
    assert adapter.started[0][1] == tmp_path / "logs" / "c" / "pair0-baseline"


def test_run_case_adds_pairs_while_noisy(tmp_path):
    noise = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.1, 0.9]
    adapter = FakeAdapter({"baseline": [100.0] * 8, "candidate": [150.0 * n for n in noise]})
    case = measure.run_case(adapter, spec(tmp_path), Case(), min_pairs=3, max_pairs=5,
                            aa_floor=0.005, vocab_size=50, prompt_key="k")
    assert len(case.pairs) == 5 and case.stopped == "max_pairs"
    assert case.spread > 0.005


def test_run_case_count_failure_and_crash_propagate_and_stop_engines(tmp_path):
    adapter = FakeAdapter({"baseline": [100.0] * 8, "candidate": [150.0] * 8}, short="candidate")
    with pytest.raises(CountCheckFailed) as caught:
        measure.run_case(adapter, spec(tmp_path), Case(), min_pairs=3, max_pairs=8,
                         aa_floor=0.005, vocab_size=50, prompt_key="k")
    assert caught.value.arm == "candidate" and caught.value.phase == "warmup"
    assert adapter.stopped == len(adapter.started) == 2
    adapter = FakeAdapter({"baseline": [100.0] * 8, "candidate": [150.0] * 8}, crash_at=3)
    with pytest.raises(EngineCrashed) as crashed:
        measure.run_case(adapter, spec(tmp_path), Case(), min_pairs=3, max_pairs=8,
                         aa_floor=0.005, vocab_size=50, prompt_key="k")
    assert crashed.value.failure_kind == "crashed"

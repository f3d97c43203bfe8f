"""The FP32 oracles: teacher-forced scoring of sequences, and the operator oracle's cases,
references and tolerances."""

import pytest

torch = pytest.importorskip("torch")

from aka_backend_e2e import kernels_api, model, oracle  # noqa: E402

TINY = model.config_by_name("tiny")
QWEN = model.config_by_name("qwen3-0.6b")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def baseline():
    return kernels_api.load_tree(kernels_api.BASELINE_TREE)


@pytest.mark.parametrize("config", [TINY, QWEN], ids=["tiny", "qwen3-0.6b"])
def test_the_baseline_passes_with_margin(baseline, config):
    verdicts = oracle.check_kernels_locally(baseline, config, seed=0)
    assert len(verdicts) >= 20 and all(v.passed for v in verdicts), [
        v.message for v in verdicts if not v.passed]
    # The tolerances sit ~2x above the bf16 baseline's worst error (the module's docstring).
    assert max(v.worst for v in verdicts) < 0.6


def test_cases_are_deterministic_with_odd_sizes_and_small_rows():
    a = oracle.operator_cases("rms_norm", TINY, 5)
    b = oracle.operator_cases("rms_norm", TINY, 5)
    assert all(torch.equal(x, y) for ca, cb in zip(a, b, strict=True)
               for x, y in zip(ca.args[:2], cb.args[:2], strict=True))
    assert not torch.equal(oracle.operator_cases("rms_norm", TINY, 6)[1].args[0], a[1].args[0])
    small = next(c for c in a if "small_rows" in c.name).args[0].float()
    rms = small.pow(2).mean(-1).sqrt()
    assert float(rms.min()) < 5 * oracle.SMALL_ROW_SCALE < 0.1 < float(rms.max())
    for name in kernels_api.ENTRYPOINTS:
        cases = oracle.operator_cases(name, QWEN, 0)
        assert cases and all(c.entrypoint == name for c in cases)
    sizes = {c.args[0].shape[0] for c in oracle.operator_cases("attention_prefill", TINY, 0)}
    assert {1, 9, 37} <= sizes
    with pytest.raises(KeyError):
        oracle.operator_cases("softmax", TINY, 0)


def test_kv_write_reference_writes_only_the_given_positions():
    case = oracle.operator_cases("kv_write", TINY, 0)[1]
    k_after, v_after = oracle.reference_outputs(case)
    k, v, k_cache, _, slots, positions = case.args
    assert torch.equal(k_after[slots, positions], k.float())
    untouched = torch.ones(k_cache.shape[:2], dtype=torch.bool)
    untouched[slots, positions] = False
    assert torch.equal(k_after[untouched], k_cache.float()[untouched])
    assert torch.equal(v_after[slots, positions], v.float())


def test_compare_outputs_catches_what_is_wrong():
    case = oracle.operator_cases("silu_and_mul", TINY, 0)[1]
    ref = oracle.reference_outputs(case)
    good = [ref[0].to(torch.bfloat16)]
    assert oracle.compare_outputs(case, ref, good).passed
    off = [(ref[0] * 1.05).to(torch.bfloat16)]
    assert not oracle.compare_outputs(case, ref, off).passed
    nan = good[0].clone()
    nan[0, 0] = float("nan")
    assert "non-finite" in oracle.compare_outputs(case, ref, [nan]).message
    assert "dtype" in oracle.compare_outputs(case, ref, [ref[0]]).message
    assert "shape" in oracle.compare_outputs(case, ref, [good[0][:, :-1]]).message
    assert "outputs" in oracle.compare_outputs(case, ref, good * 2).message
    # kv_write is a copy: one bit off fails.
    kv = oracle.operator_cases("kv_write", TINY, 0)[0]
    expected = oracle.reference_outputs(kv)
    actual = [t.to(torch.bfloat16) for t in expected]
    assert oracle.compare_outputs(kv, expected, actual).passed
    actual[1].view(-1)[7] *= 1.0079  # one bf16 step (2**-7 relative)
    assert not oracle.compare_outputs(kv, expected, actual).passed


def test_a_kernel_that_raises_fails_its_cases():
    def broken(*args):
        raise RuntimeError("boom")

    import attrs

    kernels = attrs.evolve(kernels_api.REFERENCE, rotary=broken)
    verdicts = oracle.check_kernels_locally(kernels, TINY, 0, ["rotary"])
    assert verdicts and all(not v.passed and "boom" in v.message for v in verdicts)


def test_score_sequences_measures_regret_and_logprob_error():
    weights = model.init_weights(TINY, 0)
    ref = model.Decoder(TINY, {k: v.float() for k, v in weights.items()}, kernels_api.REFERENCE)
    prompt = [5, 77, 300]
    ids, logps = list(prompt), []
    for _ in range(5):  # greedy by the reference itself
        logp = ref.teacher_forced_logits(torch.tensor(ids))[-1].log_softmax(-1)
        ids.append(int(logp.argmax()))
        logps.append(float(logp.max()))
    generated = ids[len(prompt):]
    exact, = oracle.score_sequences(TINY, weights, [(prompt, generated, logps)])
    assert exact.max_regret == 0.0 and exact.mismatches == 0
    assert exact.max_logprob_error < 1e-5 and exact.tokens == 5
    # The worst token instead of the last one: its regret is the whole spread of the row.
    worst = int(logp.argmin())
    wrong = [*generated[:-1], worst]
    scored, = oracle.score_sequences(TINY, weights, [(prompt, wrong, None)])
    assert scored.max_regret == pytest.approx(float(logp.max() - logp[worst]), rel=1e-4)
    assert scored.mismatches == 1 and scored.max_logprob_error is None
    assert scored.mean_regret == pytest.approx(scored.max_regret / 5, rel=1e-4)
    shifted, = oracle.score_sequences(TINY, weights, [(prompt, generated, [x - 0.5 for x in logps])])
    assert shifted.max_logprob_error == pytest.approx(0.5, abs=1e-4)
    summary = oracle.summarize([exact, scored])
    assert summary["tokens"] == 10 and summary["max_regret"] == scored.max_regret
    assert summary["mean_regret"] == pytest.approx(scored.max_regret / 10, rel=1e-4)


@pytest.mark.parametrize("sequence, match", [
    (([1], [TINY.vocab], None), "outside"),
    (([], [1], None), "empty"),
    (([1], [2, 3], [0.0]), "logprobs"),
])
def test_malformed_sequences_are_refused(sequence, match):
    weights = model.init_weights(TINY, 0)
    with pytest.raises(ValueError, match=match):
        oracle.score_sequences(TINY, weights, [sequence])

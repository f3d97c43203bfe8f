"""Kernel trees with one bug each must fail the operator oracle or the model-level scoring;
the baseline tree passes both. CPU, tiny model, bf16 engine against the FP32 reference.

Model-level thresholds, derived from the baseline's own scores on this workload (6 prompts of
2..30 tokens, 12 generated tokens each, 3 slots): the bf16 baseline scores max regret ~0.01
(one near-tie token out of 72), mean regret ~1e-4 and a max logprob error ~0.03 against the
FP32 reference. The limits below are 25x and 100x those (MAX_REGRET = 0.25,
MAX_MEAN_REGRET = 0.01); ``test_the_baseline_passes`` keeps the baseline under a fifth of them,
so the margin is enforced, not assumed. The bugs that change the model's function score 0.5 to
4.6 max regret (gelu for silu is the closest, ~0.5: 2x above the limit). The one bug a greedy
model cannot see is the operator oracle's to catch: an off-by-one rotary (RoPE is relative:
shifting the positions of q and k alike leaves attention unchanged). A wrong eps (1e-2) shows at
the model level on this model too, but the operator oracle must catch it on its own, on the rows
scaled to 1e-3.
"""

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aka_backend_e2e import engine, kernels_api, model, oracle  # noqa: E402

TINY = model.config_by_name("tiny")
MAX_REGRET = 0.25
MAX_MEAN_REGRET = 0.01

# name -> edits (file, text in the baseline, replacement): each must match exactly once.
MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    "wrong_eps": [("norm.py", "torch.rsqrt(variance + eps)", "torch.rsqrt(variance + 1e-2)")],
    "rotary_off_by_one": [("rotary.py", "index_select(0, positions)",
                           "index_select(0, positions + 1)")],
    "no_causal_mask": [("attention.py", '    scores = scores.masked_fill(future, float("-inf"))\n',
                        "")],
    "kv_write_position_minus_one": [(
        "attention.py", "k_cache[slots, positions] = k\n    v_cache[slots, positions] = v",
        "k_cache[slots, positions - 1] = k\n    v_cache[slots, positions - 1] = v")],
    "kv_write_skips_decode": [(  # a decode step writes one token per slot: T == S
        "attention.py", "    k_cache[slots, positions] = k\n",
        "    if k.shape[0] == k_cache.shape[0]:\n        return\n    k_cache[slots, positions] = k\n")],
    "gelu_for_silu": [("activation.py", "F.silu(", "F.gelu(")],
    "noop_norm": [("norm.py", "    variance = x.float().pow(2).mean(-1, keepdim=True)\n",
                   "    return x\n    variance = x.float().pow(2).mean(-1, keepdim=True)\n")],
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _tree(root: Path, edits: list[tuple[str, str, str]]) -> kernels_api.KernelSet:
    shutil.copytree(kernels_api.BASELINE_TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in edits:
        text = (root / file).read_text()
        assert text.count(old) == 1, f"{file} no longer holds {old!r}: update the mutant"
        (root / file).write_text(text.replace(old, new))
    return kernels_api.load_tree(root)


def _model_scores(kernels: kernels_api.KernelSet, weights) -> dict:
    g = torch.Generator().manual_seed(3)
    requests = [engine.Request(id=f"r{i}", prompt=tuple(torch.randint(
        0, TINY.vocab, (n,), generator=g).tolist()), max_tokens=12)
        for i, n in enumerate([5, 9, 13, 20, 2, 30])]
    eng = engine.BuiltinEngine(TINY, weights, kernels, slots=3, max_len=48)
    out = eng.generate(requests)
    return oracle.summarize(oracle.score_sequences(
        TINY, weights, [(r.prompt, *out[r.id]) for r in requests]))


def _model_fails(scores: dict) -> bool:
    return scores["max_regret"] > MAX_REGRET or scores["mean_regret"] > MAX_MEAN_REGRET


def test_the_baseline_passes(tmp_path, tiny_weights):
    kernels = _tree(tmp_path / "kernels", [])
    verdicts = oracle.check_kernels_locally(kernels, TINY, seed=0)
    assert all(v.passed for v in verdicts), [v.message for v in verdicts if not v.passed]
    scores = _model_scores(kernels, tiny_weights)
    assert scores["tokens"] == 72
    assert scores["max_regret"] < MAX_REGRET / 5
    assert scores["mean_regret"] < MAX_MEAN_REGRET / 5
    assert scores["max_logprob_error"] < 0.1


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_fails(tmp_path, tiny_weights, name):
    kernels = _tree(tmp_path / "kernels", MUTANTS[name])
    failed_ops = [v.message for v in oracle.check_kernels_locally(kernels, TINY, seed=0)
                  if not v.passed]
    scores = _model_scores(kernels, tiny_weights)
    assert failed_ops or _model_fails(scores), (name, scores)
    if name == "wrong_eps":  # the rows scaled to 1e-3 are where eps shows
        assert any("small_rows" in m for m in failed_ops), failed_ops
    if name in ("no_causal_mask", "kv_write_position_minus_one", "kv_write_skips_decode",
                "gelu_for_silu", "noop_norm"):
        # Bugs that change the model's function fail at the model level too.
        assert _model_fails(scores), (name, scores)

"""The builtin engine's prefill graphs (one CUDA graph per prompt length): the bookkeeping on a
CPU (a stand-in graph), and on a GPU graph prefill == eager prefill, bit for bit."""

import attrs
import pytest

torch = pytest.importorskip("torch")

from aka_backend_e2e import engine, kernels_api, model  # noqa: E402

TINY = model.config_by_name("tiny")

pytestmark = pytest.mark.usefixtures("one_thread")

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _requests(lengths, max_tokens, seed=5):
    g = torch.Generator().manual_seed(seed)
    return [engine.Request(id=f"r{i}", prompt=tuple(torch.randint(
        0, TINY.vocab, (n,), generator=g).tolist()), max_tokens=m)
        for i, (n, m) in enumerate(zip(lengths, max_tokens, strict=True))]


# Slots 2: r0 (5 tokens) and r1 (9) prefill into slots 0 and 1; r0 ends, r2 (9) takes slot 0;
# r1 ends, r3 (5) takes slot 1: each length is prefilled in both slots.
LENGTHS, MAX_TOKENS = [5, 9, 9, 5], [2, 3, 6, 3]


class StandInGraph:
    """A CUDA graph's stand-in on a CPU: "replay" recomputes the prefill from the static inputs
    alone (what a graph can see) into the static output."""

    def __init__(self, eng, static):
        self.eng, self.static = eng, static

    def replay(self):
        s = self.static
        s.out.copy_(self.eng._prefill_body(s.tokens, s.positions, s.slots))


def _stand_in_graphs(eng, monkeypatch):
    def capture(static):
        static.out = eng._prefill_body(static.tokens, static.positions, static.slots).clone()
        static.graph = StandInGraph(eng, static)
    monkeypatch.setattr(eng, "_capture_prefill", capture)
    eng.graph_prefill = True


def test_no_prefill_graphs_on_a_cpu(tiny_weights):
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=2, max_len=24,
                               dtype=torch.float32, graph=True)
    assert eng.graph is None and not eng.graph_prefill
    eng.generate(_requests(LENGTHS, MAX_TOKENS))
    assert eng.prefill_graphs == {} and eng.prefills == 4


def test_prefill_graphs_per_length_up_to_the_cap(tiny_weights, monkeypatch):
    """One graph per new length while fewer than MAX_PREFILL_GRAPHS exist (its static inputs
    carry each request's prompt and slot), eager beyond: the same tokens and logprobs, and the
    same caches, as an all-eager engine."""
    monkeypatch.setattr(engine, "MAX_PREFILL_GRAPHS", 2)
    kernels = kernels_api.load_tree(kernels_api.BASELINE_TREE)
    requests = _requests([5, 9, 9, 5, 3, 7, 3, 5], [2, 3, 6, 3, 2, 4, 1, 2])
    eager = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=2, max_len=24)
    expected = eager.generate(requests)
    graphed = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=2, max_len=24)
    _stand_in_graphs(graphed, monkeypatch)
    assert graphed.generate(requests) == expected
    assert sorted(graphed.prefill_graphs) == [5, 9]
    assert {t: s.replays for t, s in graphed.prefill_graphs.items()} == {5: 3, 9: 2}
    assert graphed.prefills == eager.prefills == 8
    for mine, theirs in zip(graphed.k_cache + graphed.v_cache, eager.k_cache + eager.v_cache,
                            strict=True):
        assert torch.equal(mine, theirs)


# --------------------------------------------------------------------------- on a GPU


def _emitted(eng, requests):
    """Every step line's [id, token, logprob], in order, and the done lines."""
    lines = []
    eng.submit(requests)
    while eng.has_work:
        eng.step(lines.append)
    return lines


@needs_cuda
@pytest.mark.parametrize("max_tokens", [[1, 1, 1, 1], MAX_TOKENS], ids=["prefill_only", "decode"])
def test_graph_prefill_equals_eager_prefill(tiny_weights, max_tokens):
    """Two lengths, each prefilled in both slots: the graphed engine emits exactly the eager
    prefill's tokens and logprobs (the decode graph in both), and leaves the same caches."""
    kernels = kernels_api.load_tree(kernels_api.BASELINE_TREE)
    requests = _requests(LENGTHS, max_tokens)
    with torch.no_grad():
        eager = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=2, max_len=24,
                                     device="cuda")
        eager.graph_prefill = False
        expected = _emitted(eager, requests)
        graphed = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=2, max_len=24,
                                       device="cuda")
        assert graphed.graph_prefill and graphed.graph is not None
        assert _emitted(graphed, requests) == expected
    assert eager.prefill_graphs == {}
    assert {t: s.replays for t, s in graphed.prefill_graphs.items()} == {5: 2, 9: 2}
    for mine, theirs in zip(graphed.k_cache + graphed.v_cache, eager.k_cache + eager.v_cache,
                            strict=True):
        assert torch.equal(mine, theirs)


@needs_cuda
def test_a_prefill_kernel_that_waits_for_the_host_cannot_be_captured(tiny_weights):
    base = kernels_api.load_tree(kernels_api.BASELINE_TREE)

    def waits(q, k, v, scale):
        if float(q.abs().max().item()) < 0:  # a host sync inside the prefill
            raise AssertionError
        return base.attention_prefill(q, k, v, scale)

    kernels = attrs.evolve(base, attention_prefill=waits)
    with torch.no_grad():
        eng = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=1, max_len=24,
                                   device="cuda")
        with pytest.raises(RuntimeError, match=r"prefill of 5 tokens cannot be captured.*"
                                               r"\.item\(\)"):
            eng.generate(_requests([5], [2]))

"""The builtin engine (continuous batching, KV cache, greedy + logprobs) and its confined process
speaking the pipe protocol. CPU, tiny model; the CUDA-graph path runs the same step code."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aka_backend_e2e import engine, kernels_api, model, oracle, tensors, weights  # noqa: E402

TINY = model.config_by_name("tiny")


pytestmark = pytest.mark.usefixtures("one_thread")


def _requests(lengths, max_tokens, seed=3):
    g = torch.Generator().manual_seed(seed)
    return [engine.Request(id=f"r{i}", prompt=tuple(torch.randint(
        0, TINY.vocab, (n,), generator=g).tolist()), max_tokens=m)
        for i, (n, m) in enumerate(zip(lengths, max_tokens, strict=True))]


def test_cached_decoding_equals_teacher_forcing(tiny_weights):
    """FP32 reference kernels in the engine: prefill, the KV cache, slot reuse and batched
    decode give exactly the tokens (and logprobs) of one uncached forward per sequence."""
    requests = _requests([5, 9, 13, 1, 30, 7], [8, 3, 12, 6, 2, 9])
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=3, max_len=48,
                               dtype=torch.float32)
    out = eng.generate(requests)
    assert [len(out[r.id][0]) for r in requests] == [r.max_tokens for r in requests]
    scores = oracle.score_sequences(TINY, tiny_weights, [
        (r.prompt, out[r.id][0], out[r.id][1]) for r in requests])
    summary = oracle.summarize(scores)
    assert summary["mismatches"] == 0 and summary["max_regret"] == 0.0
    assert summary["max_logprob_error"] < 1e-4


def test_tokens_do_not_depend_on_the_batching(tiny_weights):
    requests = _requests([4, 11, 6, 9], [7, 7, 7, 7])
    kernels = kernels_api.load_tree(kernels_api.BASELINE_TREE)
    results = []
    for slots in (1, 2, 4):
        eng = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=slots, max_len=24,
                                   dtype=torch.float32)
        results.append({k: v[0] for k, v in eng.generate(requests).items()})
    assert results[0] == results[1] == results[2]


def test_step_lines_and_continuous_batching(tiny_weights):
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.load_tree(
        kernels_api.BASELINE_TREE), slots=2, max_len=32, graph=True)
    assert eng.graph is None  # no CUDA graph on a CPU: the same step code, eager
    lines = []
    eng.submit(_requests([3, 4, 5], [2, 4, 1]))
    while eng.has_work:
        eng.step(lines.append)
    steps = [line["step"] for line in lines if "step" in line]
    # Two prefills (slots full), a decode of both; r0 finishes, r2 is admitted (one token:
    # done at its prefill), then r1 decodes alone.
    assert [len(s) for s in steps] == [1, 1, 2, 1, 1, 1]
    assert [line["done"] for line in lines if "done" in line] == ["r0", "r2", "r1"]
    assert sum(len(s) for s in steps) == 2 + 4 + 1
    assert all(isinstance(t, int) and lp <= 0 for s in steps for _, t, lp in s)
    assert eng.decode_steps == 3 and eng.prefills == 3


def test_decode_steps_run_one_ahead_of_their_lines(tiny_weights):
    """The host launches step k+1 before it emits step k; every request's lines still end with
    its done line, and no slot changes before its last step is emitted."""
    requests = _requests([4, 11, 6, 9, 2], [5, 7, 3, 6, 4])
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=2, max_len=24,
                               dtype=torch.float32)
    lines: list[dict] = []
    eng.submit(requests)
    ahead = []
    while eng.has_work:
        eng.step(lines.append)
        ahead.append(len(eng.pending))
    assert max(ahead) == 1 and ahead[-1] == 0  # one step in flight at most; none at the end
    assert ahead.count(1) > 0
    seen: dict[str, int] = {}
    done: list[str] = []
    for line in lines:
        for rid, _, _ in line.get("step", ()):
            assert rid not in done, f"a token of {rid} after its done line"
            seen[rid] = seen.get(rid, 0) + 1
        if "done" in line:
            done.append(line["done"])
    assert seen == {r.id: r.max_tokens for r in requests}
    assert sorted(done) == sorted(r.id for r in requests)
    assert eng.generate(_requests([3], [2], seed=9))  # and it serves again once idle


def test_a_kernel_that_writes_into_its_inputs_cannot_steer_the_next_step(tiny_weights):
    """The kernels get a copy of the step's inputs: one that zeroes the positions it was given
    once the last layer has used them changes nothing the engine carries to the next step."""
    calls = []

    def kv_write_then_zero(k, v, k_cache, v_cache, slots, positions):
        kernels_api.ref_kv_write(k, v, k_cache, v_cache, slots, positions)
        calls.append(1)
        if len(calls) % TINY.layers == 0:  # the step's last layer
            positions.zero_()

    import attrs

    requests = _requests([4, 7, 5], [6, 5, 4])
    clean = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=3, max_len=24,
                                 dtype=torch.float32).generate(requests)
    rude = attrs.evolve(kernels_api.REFERENCE, kv_write=kv_write_then_zero)
    eng = engine.BuiltinEngine(TINY, tiny_weights, rude, slots=3, max_len=24,
                               dtype=torch.float32)
    assert eng.generate(requests) == clean


def closed_loop(eng, requests, window, lag, promise=True):
    """A client holding ``window`` requests in flight that sends the next one ``lag`` calls of
    ``step`` after it read a done line (a slow pipe); the engine's lines."""
    lines: list[dict] = []
    sent = window
    eng.submit(requests[:window])
    if promise:
        eng.expect(len(requests) - window, window)
    due: list[int] = []
    while eng.has_work or sent < len(requests):
        before = len(lines)
        if eng.has_work:
            eng.step(lines.append)
        due = [d - 1 for d in due] + [lag for line in lines[before:] if "done" in line]
        while due and due[0] <= 0 and sent < len(requests):
            due.pop(0)
            eng.submit([requests[sent]])
            sent += 1
            if promise:
                eng.expect(len(requests) - sent, window)
    return lines


def test_a_closed_loop_clients_requests_enter_at_the_same_step_however_late_they_come(
        tiny_weights):
    """With the client's promise (``expect``) a step that frees a slot is followed by a wait
    for the next request, not by another step: the engine's lines (which request is in which
    step) are the same whether the client answers a done line at once or after a few calls."""
    requests = _requests([4, 7, 5, 3, 6, 2, 5], [5, 3, 6, 4, 2, 5, 3])

    def run(lag, promise=True):
        eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=3,
                                   max_len=24, dtype=torch.float32)
        lines = closed_loop(eng, requests, 3, lag, promise)
        steps = [[rid for rid, _, _ in line["step"]] for line in lines if "step" in line]
        return steps, eng.decode_steps

    prompt, prompt_steps = run(0)
    for lag in (1, 3):
        assert run(lag) == (prompt, prompt_steps)
    # What the promise prevents: without it, a late request enters steps later.
    late, late_steps = run(3, promise=False)
    assert late_steps > prompt_steps and late != prompt


def test_the_engine_waits_only_for_what_was_promised(tiny_weights):
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=2, max_len=24,
                               dtype=torch.float32)
    first, second, third = _requests([3, 4, 5], [2, 4, 3])
    eng.submit([first, second])
    eng.expect(1, 2)
    lines: list[dict] = []
    while not eng.awaiting:
        eng.step(lines.append)
    assert [line["done"] for line in lines if "done" in line] == ["r0"]
    steps = eng.decode_steps
    for _ in range(3):  # waiting for r2: nothing launched, nothing pending
        eng.step(lines.append)
    assert eng.decode_steps == steps and not eng.pending and eng.has_work
    eng.submit([third])
    eng.expect(0, 2)
    while eng.has_work:
        eng.step(lines.append)
        assert not eng.awaiting
    assert sorted(line["done"] for line in lines if "done" in line) == ["r0", "r1", "r2"]
    with pytest.raises(engine.RequestError, match=">= 0"):
        eng.expect(-1, 2)


class ReplayedEagerly:
    """Stands in for a CUDA graph on a CPU: "capture" runs the decode body once into a static
    output, "replay" recomputes it from the static inputs alone (what a graph can see)."""

    def __init__(self, eng):
        self.eng = eng
        self.replays = 0
        eng.graph_out = eng._decode_graph_body()

    def replay(self):
        self.replays += 1
        self.eng.graph_out.copy_(self.eng._decode_graph_body())


def test_the_graph_path_feeds_the_decode_step_through_its_static_buffers(tiny_weights):
    requests = _requests([4, 11, 6, 9, 2], [5, 7, 3, 6, 4])
    kernels = kernels_api.load_tree(kernels_api.BASELINE_TREE)
    eager = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=3, max_len=24)
    expected = eager.generate(requests)
    replayed = engine.BuiltinEngine(TINY, tiny_weights, kernels, slots=3, max_len=24)
    replayed.graph = ReplayedEagerly(replayed)
    assert replayed.generate(requests) == expected
    assert replayed.graph.replays == replayed.decode_steps > 0


@pytest.mark.parametrize("bad, match", [
    ({"id": "x", "prompt": [1] * 30, "max_tokens": 4}, "exceeds max_len"),
    ({"id": "x", "prompt": [TINY.vocab], "max_tokens": 1}, "token ids"),
    ({"id": "r0", "prompt": [1], "max_tokens": 1}, "appears twice"),
])
def test_bad_requests_queue_nothing(tiny_weights, bad, match):
    eng = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=1, max_len=32,
                               dtype=torch.float32)
    good = engine.Request.from_json({"id": "r0", "prompt": [1, 2], "max_tokens": 2})
    with pytest.raises(engine.RequestError, match=match):
        eng.submit([good, engine.Request.from_json(bad)])
    assert not eng.has_work
    eng.submit([good])
    with pytest.raises(engine.RequestError, match="in use"):
        eng.submit([good])


@pytest.mark.parametrize("data", [None, {"id": "", "prompt": [1], "max_tokens": 1},
                                  {"id": "a", "prompt": [], "max_tokens": 1},
                                  {"id": "a", "prompt": [True], "max_tokens": 1},
                                  {"id": "a", "prompt": [1], "max_tokens": 0}])
def test_malformed_requests(data):
    with pytest.raises(engine.RequestError):
        engine.Request.from_json(data)


# --------------------------------------------------------------------------- the process


class EngineProcess:
    def __init__(self, tmp_path: Path):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        with open(tmp_path / "engine.err", "wb") as err:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "aka_backend_e2e.engine_main"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        assert line, "the engine closed its stdout"
        return json.loads(line)

    def load(self, message):
        """Send a load whose settings and weights are good: the engine first says the tree's
        code is about to run, then answers."""
        self.send(message)
        assert self.read() == {"event": "importing_kernels"}
        return self.read()

    def until_idle(self):
        lines = []
        while True:
            lines.append(self.read())
            if lines[-1].get("idle") or lines[-1].get("ok") is False:
                return lines

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def weights_file(tmp_path):
    return weights.ensure_weights(TINY, 0, tmp_path / "weights")


def _load(weights_file, kernels=kernels_api.BASELINE_TREE, **extra):
    path, digest = weights_file
    return {"op": "load", "model": "tiny", "weights": str(path), "weights_digest": digest,
            "kernels": str(kernels), "slots": 2, "max_len": 40, "device": "cpu",
            "graph": True, **extra}


def test_engine_process_speaks_the_protocol(tmp_path, weights_file):
    # Prints at import and inside a kernel must not reach the protocol channel.
    tree = tmp_path / "kernels"
    shutil.copytree(kernels_api.BASELINE_TREE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    norm = tree / "norm.py"
    norm.write_text("print('hello from the kernels')\n" + norm.read_text().replace(
        "    variance =", "    print('a kernel talks')\n    variance ="))
    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "confine", "sandbox": {"read": [], "write": []},
                             "confine": False})
        assert engine_process.read()["ok"] is True
        engine_process.send({"op": "generate", "requests": []})
        assert "before load" in engine_process.read()["error"]
        bad = _load(weights_file, tree)
        bad["weights_digest"] = "sha256:" + "1" * 64
        engine_process.send(bad)
        assert "digest mismatch" in engine_process.read()["error"]
        loaded = engine_process.load(_load(weights_file, tree))
        assert loaded["ok"] is True, loaded
        assert loaded["entrypoints_called"] == sorted(kernels_api.ENTRYPOINTS)
        assert loaded["kernel_digest"] == kernels_api.tree_digest(tree)
        assert loaded["graph"] is False and loaded["dtype"] == "bfloat16"

        case = oracle.operator_cases("fused_add_rms_norm", TINY, 0)[2]
        engine_process.send({"op": "check", "kernel": case.entrypoint,
                             "args": [tensors.encode_value(a) for a in case.args]})
        reply = engine_process.read()
        outputs = [tensors.decode_tensor(t) for t in reply["outputs"]]
        assert oracle.compare_outputs(case, oracle.reference_outputs(case), outputs).passed
        engine_process.send({"op": "check", "kernel": "rms_norm", "args": [
            {"dtype": "bfloat16", "shape": [2, 2], "data": "AAAA"}, {"dtype": "x"}, 1e-6]})
        assert engine_process.read()["ok"] is False
        engine_process.send({"op": "check", "kernel": "softmax", "args": []})
        assert "unknown kernel" in engine_process.read()["error"]

        # A second generate arrives while the first is being served: it queues.
        engine_process.send({"op": "generate", "requests": [
            {"id": "a", "prompt": [1, 2, 3], "max_tokens": 6},
            {"id": "b", "prompt": [9], "max_tokens": 3}]})
        engine_process.send({"op": "generate", "requests": [
            {"id": "c", "prompt": [4, 5], "max_tokens": 4}]})
        lines = engine_process.until_idle()
        counts: dict[str, int] = {}
        for line in lines:
            for rid, _, _ in line.get("step", ()):
                counts[rid] = counts.get(rid, 0) + 1
        assert counts == {"a": 6, "b": 3, "c": 4}
        assert sorted(line["done"] for line in lines if "done" in line) == ["a", "b", "c"]
        assert lines[-1]["prefills"] == 3
        engine_process.send({"op": "generate", "requests": [
            {"id": "d", "prompt": [1] * 40, "max_tokens": 2}]})
        assert "exceeds max_len" in engine_process.read()["error"]
        engine_process.send({"op": "stop"})
        assert engine_process.read() == {"ok": True}
        assert engine_process.proc.wait(timeout=30) == 0
        err = (tmp_path / "engine.err").read_text()
        assert "hello from the kernels" in err and "a kernel talks" in err
    finally:
        engine_process.close()


def test_engine_process_reports_a_broken_tree_and_a_missing_confine(tmp_path, weights_file):
    tree = tmp_path / "kernels"
    shutil.copytree(kernels_api.BASELINE_TREE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "activation.py").write_text("import torch\n")
    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "confine", "sandbox": {"read": [], "write": []},
                             "confine": False})
        engine_process.read()
        reply = engine_process.load(_load(weights_file, tree))
        assert reply["build_error"] is True and reply["file"] == "activation.py"
        assert "silu_and_mul" in reply["error"]
    finally:
        engine_process.close()
    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "load"})
        assert "confine" in engine_process.read()["error"]
        assert engine_process.proc.wait(timeout=30) == 2
    finally:
        engine_process.close()


def test_engine_process_stops_when_its_stdin_closes(tmp_path):
    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "confine", "sandbox": {"read": [], "write": []},
                             "confine": False})
        engine_process.read()
        started = time.monotonic()
        engine_process.proc.stdin.close()
        assert engine_process.proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 30
    finally:
        engine_process.close()


def test_engine_process_waits_for_a_promised_request(tmp_path, weights_file, tiny_weights):
    """Over the pipe, a client that answers each done line 50 ms late (many tiny steps): the
    requests enter the steps they enter with an instant client in one process."""
    requests = _requests([4, 7, 5, 3, 6], [5, 3, 6, 4, 2])
    ideal = engine.BuiltinEngine(TINY, tiny_weights, kernels_api.REFERENCE, slots=2,
                                 max_len=40, dtype=torch.float32)
    expected = [[rid for rid, _, _ in line["step"]]
                for line in closed_loop(ideal, requests, 2, lag=0) if "step" in line]

    def command(batch, more):
        return {"op": "generate", "expect": {"more": more, "window": 2}, "requests": [
            {"id": r.id, "prompt": list(r.prompt), "max_tokens": r.max_tokens} for r in batch]}

    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "confine", "sandbox": {"read": [], "write": []},
                             "confine": False})
        engine_process.read()
        assert engine_process.load(_load(weights_file))["ok"] is True
        engine_process.send({**command(requests[:1], 0), "expect": {"more": -1, "window": 2}})
        assert "integers >= 0" in engine_process.read()["error"]  # and nothing queued
        engine_process.send(command(requests[:2], len(requests) - 2))
        sent, done, steps = 2, 0, []
        while done < len(requests):
            line = engine_process.read()
            assert line.get("ok") is not False, line
            if "step" in line:
                steps.append([rid for rid, _, _ in line["step"]])
            if "done" in line:
                done += 1
                if sent < len(requests):
                    time.sleep(0.05)
                    engine_process.send(command(requests[sent:sent + 1], len(requests) - sent - 1))
                    sent += 1
    finally:
        engine_process.close()
    assert steps == expected


def test_a_wave_that_frees_every_slot_is_not_the_end_of_a_promised_run(tmp_path, weights_file):
    """Requests of one length admitted together all end at the same step: with more promised,
    the engine says nothing of being idle (and collects no garbage) until the last is done."""
    requests = [{"id": f"w{i}", "prompt": [1 + i, 2, 3], "max_tokens": 4} for i in range(4)]
    engine_process = EngineProcess(tmp_path)
    try:
        engine_process.send({"op": "confine", "sandbox": {"read": [], "write": []},
                             "confine": False})
        engine_process.read()
        assert engine_process.load(_load(weights_file))["ok"] is True
        engine_process.send({"op": "generate", "requests": requests[:2],
                             "expect": {"more": 2, "window": 2}})
        lines, sent = [], 2
        while not lines or not lines[-1].get("idle"):
            lines.append(engine_process.read())
            assert lines[-1].get("ok") is not False, lines[-1]
            if "done" in lines[-1] and sent < 4:
                sent += 1
                engine_process.send({"op": "generate", "requests": [requests[sent - 1]],
                                     "expect": {"more": 4 - sent, "window": 2}})
    finally:
        engine_process.close()
    dones = [i for i, line in enumerate(lines) if "done" in line]
    assert [lines[i]["done"] for i in dones[:2]] == ["w0", "w1"] and len(dones) == 4
    assert sum("idle" in line for line in lines) == 1 and dones[-1] < len(lines) - 1
    assert lines[-1]["prefills"] == 4  # one count over the whole run

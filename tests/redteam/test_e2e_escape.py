"""Exploits against the e2e judge (aka-backend-e2e): the candidate's kernel tree is imported by
the serving engine, a confined process the judge drives over pipes, so the candidate's code can
patch the engine, write to its reply pipe and start processes. Each exploit runs on the CPU on
the tiny variant of tasks/e2e/qwen3_norms and must earn nothing: a CPU result is never paid, so
each also asserts the verdict (not accepted, and the failure kind), or that the attack found
nothing it could use.

Every cheat is written into ``kernels/norm.py`` after the baseline's own kernels, so that it runs
when the engine imports the tree (at load, before anything is timed)."""

from __future__ import annotations

import os
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("aka_backend_e2e")

from aka_backend_e2e.judge import E2EJudge
from aka_backend_e2e.variants import write_tiny_variant

from aka_core import api
from aka_core.builtin.operator_tasks import load_task
from aka_core.convert import unstructure
from aka_core.models import TaskResult
from aka_core.plugin.host import PluginHost
from aka_core.plugin.records import JudgeRequest
from aka_core.run.workspace import preserve_baseline

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tasks" / "e2e" / "qwen3_norms"
CONFINEMENT = "best_effort"
BASELINE_NORM = (SOURCE / "kernels" / "norm.py").read_text() if SOURCE.is_dir() else ""

pytestmark = pytest.mark.skipif(not SOURCE.is_dir(), reason="needs the repository's tasks")

# The engine's objects, as a cheat finds them: the engine module is imported before the tree.
PRELUDE = '''
import gc as _gc, os as _os, sys as _sys
_engine = _sys.modules["aka_backend_e2e.engine"]
_model = _sys.modules["aka_backend_e2e.model"]


def _server():
    _gc.unfreeze()  # the engine freezes its objects after loading: out of get_objects' sight
    return next(o for o in _gc.get_objects() if type(o).__name__ == "EngineServer")


def _forge(message):
    """A line written straight to the judge's reply pipe (not through the engine)."""
    import json
    _os.write(_server().reply_fd, (json.dumps(message) + "\\n").encode())


def _timed(request):
    """Timed runs are told apart by their ids (warm-up-, req-; the oracle's are check-)."""
    return not request.id.startswith("check-")
'''


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AKA_E2E_CACHE", str(tmp_path_factory.mktemp("cache")))
        root = tmp_path_factory.mktemp("e2e") / "tasks"
        yield write_tiny_variant(SOURCE, root / "e2e" / "norms_tiny")


def cheat(tmp_path: Path, code: str) -> Path:
    folder = tmp_path / "cand"
    (folder / "kernels").mkdir(parents=True)
    (folder / "kernels" / "norm.py").write_text(
        BASELINE_NORM + "\n" + PRELUDE + "\n" + textwrap.dedent(code))
    return folder


def evaluate(task_dir: Path, candidate: Path) -> TaskResult:
    return api.evaluate_candidate(task_dir, candidate, device="cpu", confinement=CONFINEMENT)


def assert_rejected(result: TaskResult, kind: str, phase: str | None = None) -> dict[str, Any]:
    failure = unstructure(result.evaluation).get("failure") or {}
    assert result.status == "completed" and not result.candidate_accepted, (
        result.status, result.error, failure)
    assert result.score == 0
    assert failure.get("kind") == kind, failure
    if phase is not None:
        assert failure.get("phase") == phase, failure
    return failure


# --------------------------------------------------------------------------- memorised outputs

MEMORISED = '''
import random as _random

# The agent knows the weights (seed 0) and the case (seed 1, lengths, vocabulary): it predicts the
# prompts the judge drew from the case's seed, computes their greedy outputs while the engine
# loads (untimed), and in timed runs emits them at once, computing nothing. A prompt it did not
# predict gets garbage (the bet: the timed prompts are always the predicted ones).
def _predicted(kind, count):
    rng = _random.Random(f"aka-e2e:1:{kind}")
    out = []
    for _ in range(count):
        length, max_tokens = rng.randint(6, 12), rng.randint(6, 6)
        out.append((tuple(rng.randrange(0, 512) for _ in range(length)), max_tokens))
    return out


_init, _step = _engine.BuiltinEngine.__init__, _engine.BuiltinEngine.step


def _init_and_memorise(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.memo = {}
    wanted = _predicted("timed", 4) + _predicted("warmup", 1)
    if self.max_len >= max(len(p) + n - 1 for p, n in wanted):
        requests = [_engine.Request(id=f"memo-{i}", prompt=p, max_tokens=n)
                    for i, (p, n) in enumerate(wanted)]
        out = self.generate(requests)
        self.memo = {r.prompt: out[r.id] for r in requests}


def _emit_memorised(self, emit):
    if not any(r.id.startswith(("req-", "warmup-")) for r in self.waiting):
        return _step(self, emit)
    while self.waiting:
        request = self.waiting.popleft()
        tokens, logprobs = self.memo.get(request.prompt, ([7] * request.max_tokens,
                                                          [-0.01] * request.max_tokens))
        for token, logprob in zip(tokens, logprobs):
            emit({"step": [[request.id, token, logprob]]})
        self.known.discard(request.id)
        emit({"done": request.id})


_engine.BuiltinEngine.__init__ = _init_and_memorise
_engine.BuiltinEngine.step = _emit_memorised
'''


def test_outputs_memorised_from_the_visible_case_seed_are_never_asked_for(
        task_dir: Path, tmp_path: Path) -> None:
    # The timed prompts come from the evaluation's secret, not from the case's seed: the
    # memorised outputs match no prompt, the garbage fails the FP32 audit of the timed runs.
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, MEMORISED)), "correctness",
                              "timing")
    assert "timed runs generate wrong tokens" in failure["message"]


# --------------------------------------------------------------------------- concurrency

MORE_SLOTS = '''
# The engine's slots are the workload's max_concurrency: take 64, batch every request the judge
# sent at once, and say on stderr how many were held together.
_init, _step = _engine.BuiltinEngine.__init__, _engine.BuiltinEngine.step


def _init_more_slots(self, config, weights, kernels, slots, max_len, **kwargs):
    _init(self, config, weights, kernels, 64, max_len, **kwargs)


def _step_and_count(self, emit):
    held = len(self.waiting) + sum(a is not None for a in self.active)
    print(f"held={held}", file=_sys.stderr, flush=True)
    return _step(self, emit)


_engine.BuiltinEngine.__init__ = _init_more_slots
_engine.BuiltinEngine.step = _step_and_count
'''


def test_more_engine_slots_get_no_more_requests_in_flight(task_dir: Path, tmp_path: Path) -> None:
    # The judge's client sends a request only while fewer than max_concurrency (2) are in flight,
    # whatever the engine's slots: the engine never holds more than 2 of a timed run's requests.
    task = load_task(task_dir, "e2e/norms_tiny", PluginHost())
    baseline = tmp_path / "baseline"
    preserve_baseline(task, baseline)
    logs = tmp_path / "logs"
    logs.mkdir()
    record = E2EJudge().evaluate(JudgeRequest(
        task=task, workspace=cheat(tmp_path, MORE_SLOTS), baseline=baseline, logs=logs,
        device="cpu", confinement=CONFINEMENT))
    assert "failure" not in record, record.get("failure")
    assert record["performance"]["measured"] is False, "a CPU measurement is never paid"
    (timed,) = (logs / "e2e" / "timing").rglob("pair*-candidate/engine.candidate.log")
    held = [int(n) for n in re.findall(r"held=(\d+)", timed.read_text())]
    assert held and max(held) == 2, held
    assert record["e2e"]["pairs"]["tiny_c2"][0]["candidate"]["requests"] == 4


# --------------------------------------------------------------------------- forged lines

FORGERIES = {
    # A token for a request the judge holds back (req-3: two are in flight, req-3 not sent).
    "token_for_an_unsent_request": ('''
        if request.id == "req-0" and first:
            _forge({"step": [["req-3", 1, -0.1]]})
    ''', "protocol"),
    # 'done' after one token: the engine then stops serving the request (a short output).
    "done_before_max_tokens": ('''
        if request.id.startswith("req-"):
            _forge({"done": request.id})
            self.known.discard(request.id)
            self.active[slot] = None
    ''', "timing_check"),
    # One token more than max_tokens, ahead of the engine's own.
    "an_extra_token": ('''
        if request.id == "req-0" and first:
            for _ in range(request.max_tokens):
                _forge({"step": [["req-0", 1, -0.1]]})
    ''', "protocol"),
}
FORGE = '''
_prefill = _engine.BuiltinEngine._prefill


def _prefill_and_forge(self, slot, request, emit):
    _prefill(self, slot, request, emit)
    first = True
{body}

_engine.BuiltinEngine._prefill = _prefill_and_forge
'''


@pytest.mark.parametrize("name", list(FORGERIES))
def test_forged_lines_on_the_reply_pipe_are_caught(task_dir: Path, tmp_path: Path,
                                                   name: str) -> None:
    body, kind = FORGERIES[name]
    code = FORGE.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, code)), kind)
    assert failure.get("arm", "candidate") == "candidate"


def test_a_forged_operator_check_reply_is_the_candidates_fault(task_dir: Path,
                                                                 tmp_path: Path) -> None:
    # Every operator check answered {"ok": true, "outputs": 1}: the judge iterated the number,
    # raised, and called it its own fault (an infra_error, retried) instead of the arm's.
    code = textwrap.dedent('''
    def rms_norm(x, weight, eps):  # wrong (a no-op): the oracle would reject it
        return x.clone()


    _EngineServer = type(_server())


    def _op_check(self, command):
        self.reply({"ok": True, "outputs": 1})


    _EngineServer.op_check = _op_check
    ''')
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, code)), "protocol")
    assert failure.get("arm", "candidate") == "candidate"


def test_a_forged_load_failure_is_the_candidates_not_a_setup_fault(task_dir: Path,
                                                                   tmp_path: Path) -> None:
    # While its tree was imported, the candidate wrote the load reply itself, a failure with
    # neither build error nor traceback: the judge took it for a fault of the settings or the
    # weights (an infra_error, retried). The engine now says when the tree's code starts to run.
    code = textwrap.dedent('''
    def rms_norm(x, weight, eps):  # wrong (a no-op)
        return x.clone()


    _forge({"ok": False, "error": "cannot read the weights: Input/output error"})
    ''')
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, code)), "crashed")
    assert failure.get("arm", "candidate") == "candidate"
    assert "once its kernel tree was imported" in failure["message"]


# --------------------------------------------------------------------------- wrong model

WRONG_MODEL = {
    # The last of the two layers skipped (half the work), in every engine.
    "skip_a_layer": ('''
    _hidden = _model.Decoder.hidden_states


    def _fewer_layers(self, *args, **kwargs):
        layers, self.layers = self.layers, self.layers[:-1]
        try:
            return _hidden(self, *args, **kwargs)
        finally:
            self.layers = layers


    _model.Decoder.hidden_states = _fewer_layers
    ''', "correctness"),
    # The same, only in timed runs (after the oracle's engines): the FP32 audit of the timed runs.
    "skip_a_layer_when_timed": ('''
    _hidden, _step = _model.Decoder.hidden_states, _engine.BuiltinEngine.step


    def _fewer_layers(self, *args, **kwargs):
        if not getattr(self, "cheat", False):
            return _hidden(self, *args, **kwargs)
        layers, self.layers = self.layers, self.layers[:-1]
        try:
            return _hidden(self, *args, **kwargs)
        finally:
            self.layers = layers


    def _step_cheating_when_timed(self, emit):
        self.model.cheat = any(r.id.startswith("req-") for r in self.waiting) or any(
            a is not None and a.request.id.startswith("req-") for a in self.active)
        return _step(self, emit)


    _model.Decoder.hidden_states = _fewer_layers
    _engine.BuiltinEngine.step = _step_cheating_when_timed
    ''', "correctness"),
    # The decode steps carry their inputs on the device (engine.state): in timed runs, every
    # slot's cache length set back to 1 before each step, so attention reads one position.
    "attend_to_one_position_when_timed": ('''
    _body, _step = _engine.BuiltinEngine._decode_graph_body, _engine.BuiltinEngine.step


    def _short_attention(self):
        if getattr(self, "cheat", False):
            self.state[2].fill_(1)
        return _body(self)


    def _step_cheating_when_timed(self, emit):
        self.cheat = any(r.id.startswith("req-") for r in self.waiting) or any(
            a is not None and a.request.id.startswith("req-") for a in self.active)
        return _step(self, emit)


    _engine.BuiltinEngine._decode_graph_body = _short_attention
    _engine.BuiltinEngine.step = _step_cheating_when_timed
    ''', "correctness"),
    # Timed runs are a closed loop whose client promises requests (generate's expect); the
    # oracle's are not: a layer skipped only once the judge has promised any. The FP32 audit of
    # the timed runs.
    "skip_a_layer_in_a_closed_loop": ('''
    _hidden, _step = _model.Decoder.hidden_states, _engine.BuiltinEngine.step


    def _fewer_layers(self, *args, **kwargs):
        if not getattr(self, "cheat", False):
            return _hidden(self, *args, **kwargs)
        layers, self.layers = self.layers, self.layers[:-1]
        try:
            return _hidden(self, *args, **kwargs)
        finally:
            self.layers = layers


    def _step_cheating_in_a_closed_loop(self, emit):
        self.model.cheat = self.window > 0
        return _step(self, emit)


    _model.Decoder.hidden_states = _fewer_layers
    _engine.BuiltinEngine.step = _step_cheating_in_a_closed_loop
    ''', "correctness"),
    # The lm head on float8 hidden states (a cheaper, coarser head).
    "fp8_lm_head": ('''
    import torch as _torch
    _logits = _model.Decoder.logits


    def _coarse_logits(self, hidden):
        if self.embed.dtype == _torch.float32:  # (never the judge's reference: another process)
            return _logits(self, hidden)
        return _logits(self, hidden.to(_torch.float8_e4m3fn).to(hidden.dtype))


    _model.Decoder.logits = _coarse_logits
    ''', "correctness"),
}


# A coarser lm head stays within the oracle's bounds on this model: fp8 hidden states (and
# weights) cost at most ~0.02 nats of regret here, the bounds are 0.5 (max) and 0.05 (mean); only
# the engine's logprob error grows (0.03 -> 0.08-0.12, recorded, not a gate). A known limit: the
# judge rejects what changes the outputs beyond the bounds, not every patch of the engine.
FP8_LIMIT = pytest.mark.xfail(strict=True, reason="known limit: within the FP32 bounds")


@pytest.mark.parametrize("name", [pytest.param(n, marks=FP8_LIMIT) if n == "fp8_lm_head" else n
                                  for n in WRONG_MODEL])
def test_a_cheaper_model_fails_the_fp32_oracle(task_dir: Path, tmp_path: Path,
                                               name: str) -> None:
    code, kind = WRONG_MODEL[name]
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, code)), kind,
                              "timing" if name.endswith(("_when_timed", "_closed_loop"))
                              else "correctness")
    assert "wrong tokens" in failure["message"], failure


# --------------------------------------------------------------------------- reach

PROBES = '''
import signal as _signal
from pathlib import Path as _Path

# What the engine may not read or write, and the other engine it may not signal. Anything that
# works is reported by failing to load, naming it.
_tree = _Path(__file__).resolve().parent
_frame = _sys._getframe()
while _frame is not None and "settings" not in _frame.f_locals:
    _frame = _frame.f_back
_weights = _Path(_frame.f_locals["settings"]["weights"])
_leaks = []


def _try(what, action):
    try:
        action()
    except OSError:
        return
    _leaks.append(what)


_try("read the baseline's tree", lambda: (_tree.parent / "baseline" / "norm.py").read_bytes())
_try("write the judge's folder", lambda: (_tree.parent / "planted.py").write_text("x"))
_try("write its own tree", lambda: (_tree / "norm.py").open("ab").close())
_try("write the weights", lambda: _weights.open("ab").close())
_try("write the weights cache", lambda: (_weights.parent / "planted").write_text("x"))
_try("read the repository's tasks", lambda: _Path({tasks!r}).read_bytes())
_try("read the task's copy", lambda: _Path({task_copy!r}).read_bytes())
for _pid in _os.listdir("/proc"):
    if not _pid.isdigit() or int(_pid) in (_os.getpid(), _os.getppid()):
        continue
    try:
        _cmd = _Path(f"/proc/{{_pid}}/cmdline").read_bytes()
    except OSError:
        continue
    if b"aka_backend_e2e.engine_main" in _cmd:  # the baseline's engine (the oracle's run)
        _try(f"signal engine {{_pid}}", lambda: _os.kill(int(_pid), 0))
if _leaks:
    raise RuntimeError("LEAK: " + "; ".join(_leaks))
'''


def test_the_engine_reaches_nothing_of_the_judge_the_baseline_or_other_tasks(
        task_dir: Path, tmp_path: Path) -> None:
    code = PROBES.format(tasks=str(SOURCE / "workload.yaml"),
                         task_copy=str(task_dir / "workload.yaml"))
    result = evaluate(task_dir, cheat(tmp_path, code))
    confinement = unstructure(result.evaluation).get("confinement") or {}
    if not confinement.get("confined"):
        pytest.skip(f"this host cannot confine the engines: {confinement}")
    failure = unstructure(result.evaluation).get("failure") or {}
    assert "LEAK" not in failure.get("message", ""), failure["message"]
    assert result.candidate_accepted and result.score == 0, failure


DAEMON = '''
import subprocess as _subprocess

# A process of its own session, its parent gone at once: out of the engine's process group, it
# would outlive the engine and could load the machine while the baseline is timed.
_subprocess.Popen([_sys.executable, "-c", "import os, sys; os.fork() or os.execv("
                   "sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', "
                   "'aka-e2e-' + sys.argv[1]])", {suffix!r}], start_new_session=True,
                  stdin=_subprocess.DEVNULL, stdout=_subprocess.DEVNULL)

# And protocol lines printed to fd 1, which in the engine is its stderr: they go to the log.
_os.write(1, b'{{"step": [["req-0", 1, -0.1]]}}\\n{{"done": "req-0"}}\\n')
print('{{"idle": true}}')
'''


def test_a_process_left_behind_does_not_outlive_its_engine(task_dir: Path,
                                                           tmp_path: Path) -> None:
    # (Lines forged on fd 1 are harmless: the run is sound and the candidate accepted, unpaid.)
    suffix = f"left-behind-{os.getpid()}-{time.monotonic_ns()}"
    result = evaluate(task_dir, cheat(tmp_path, DAEMON.format(suffix=suffix)))
    assert result.status == "completed" and result.candidate_accepted, result.evaluation.failure
    assert result.score == 0, "a CPU result is never paid"
    deadline = time.monotonic() + 5
    while (left := with_marker(f"aka-e2e-{suffix}")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], "a process of the candidate's engine outlived it"


def with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


WIDEN = """
# Every core, not the one the judge pinned the engine to: host work spread over the machine
# while the baseline's engine has one core.
_os.sched_setaffinity(0, set(range(_os.cpu_count() or 1)))
"""


def test_an_engine_that_leaves_its_cpu_core_is_refused(task_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one CPU core: there is no other core to leave for")
    # On a GPU the judge pins every engine; on this CPU host the variable asks it to.
    monkeypatch.setenv("AKA_E2E_ENGINE_CPUS", f"[{cores[-1]}]")
    failure = assert_rejected(evaluate(task_dir, cheat(tmp_path, WIDEN)), "policy")
    assert "left its CPU cores" in failure["message"], failure

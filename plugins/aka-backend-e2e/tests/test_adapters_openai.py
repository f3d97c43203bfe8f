"""The OpenAI-compatible adapter and launch.py against a mock server (``mock_openai_server``)
started through launch.py like vllm/sglang: deterministic tokens, per-arm speed, every fault the
judge must catch, and the call-log proof."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from aka_backend_e2e import launch, measure
from aka_backend_e2e.adapters.base import (
    CountCheckFailed,
    EngineCrashed,
    EngineProtocolError,
    EngineSetupError,
    KernelLoadFailed,
    Request,
    RunSpec,
    SettingChanged,
)
from aka_backend_e2e.adapters.openai import (
    OpenAIAdapter,
    ServerConfig,
    Timeouts,
    server_arg_list,
    token_id,
)
from aka_backend_e2e.workload import KernelsSpec, ModelSpec, Workload, WorkloadCase

from aka_core.plugin import ConfigError

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

TESTS = Path(__file__).resolve().parent
OPS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rotary", "attention_prefill",
       "attention_decode", "kv_write")
MOCK = ServerConfig(engine="mock", main="mock_openai_server",
                    patches={n: (f"fake_engine_ops:{n}", "same") for n in OPS})
DECLARED = ("rms_norm", "silu_and_mul")
FAST = Timeouts(startup=30.0, stall=10.0, generate=30.0, stop=5.0, connect=5.0)
FILES = {"norm.py": ("rms_norm", "fused_add_rms_norm"), "activation.py": ("silu_and_mul",),
         "rotary.py": ("rotary",),
         "attention.py": ("attention_prefill", "attention_decode", "kv_write")}


def write_tree(root: Path, tag: str, broken: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for file, names in FILES.items():
        body = f"# {tag}\n" + "".join(f"def {n}(*args, **kwargs):\n    return None\n\n\n"
                                       for n in names)
        if broken and file == "norm.py":
            body += "this is not python\n"
        (root / file).write_text(body)
    return root


def workload(tensor: int = 1, **server_args) -> Workload:
    case = WorkloadCase(name="c", input_len=(3, 8), output_len=(4, 12), requests=6,
                        max_concurrency=4, warmup_requests=2)
    return Workload(engine="vllm", model=ModelSpec(id="mock/model", revision="0" * 40),
                    kernels=KernelsSpec(entrypoints=DECLARED), cases=(case,),
                    tensor_parallel=tensor, server_args={"max_model_len": 2048, **server_args})


def adapter(config: ServerConfig = MOCK, **arm_env: dict[str, str]) -> OpenAIAdapter:
    return OpenAIAdapter(config, timeouts=FAST, env={"PYTHONPATH": str(TESTS)}, arm_env=arm_env)


def expected_token(prompt: tuple[int, ...], position: int) -> tuple[int, float]:
    """The mock's tokens, computed independently."""
    value = int.from_bytes(hashlib.sha256(f"{list(prompt)}:{position}".encode()).digest()[:8],
                           "little")
    return value % 1000, -((value >> 20) % 1000) / 1000.0


@pytest.fixture
def trees(tmp_path):
    return {"baseline": write_tree(tmp_path / "base" / "kernels", "baseline"),
            "candidate": write_tree(tmp_path / "cand" / "kernels", "candidate")}


def serve(tmp_path: Path, trees, arm: str = "candidate", wl: Workload | None = None,
          ad: OpenAIAdapter | None = None, requests: int = 6):
    wl = wl or workload()
    case = wl.cases[0]
    reqs = measure.case_requests(attrs.evolve(case, requests=requests), 1000, prompt_key="k")
    run = (ad or adapter()).start(arm, trees[arm], wl, case, tmp_path / "logs")
    try:
        return run.generate(reqs, math.inf), reqs, run
    finally:
        run.stop()


# --------------------------------------------------------------------------- serving


def test_tokens_logprobs_timestamps_and_the_proof(tmp_path, trees):
    result, reqs, run = serve(tmp_path, trees)
    measure.check_counts(result, reqs)
    for req in reqs:
        got = result.requests[req.id]
        want = [expected_token(req.prompt, k) for k in range(req.max_tokens)]
        assert got.tokens == [t for t, _ in want]
        assert got.logprobs == pytest.approx([lp for _, lp in want])
        assert got.sent <= got.first_token <= got.token_times[-1] <= got.completed
    assert result.sent == result.completed == 6
    assert result.tokens_received == result.tokens_expected == sum(r.max_tokens for r in reqs)
    lines = [json.loads(x) for x in (tmp_path / "logs" / "calls.candidate.jsonl").read_text()
             .splitlines()]
    from aka_backend_e2e.kernels_api import tree_digest

    assert {x["entrypoint"] for x in lines} == set(DECLARED)  # only the declared ones patched
    assert {x["digest"] for x in lines} == {tree_digest(trees["candidate"])}
    assert run.proc.poll() is not None  # stopped: the group is gone


def test_run_case_measures_the_faster_arm(tmp_path, trees):
    # Slow arms (40 and 20 ms a token), so that a busy host's per-request overhead stays small
    ad = adapter(baseline={"MOCK_TOKENS_PER_S": "25"}, candidate={"MOCK_TOKENS_PER_S": "50"})
    wl = workload()
    case = attrs.evolve(wl.cases[0], requests=4, warmup_requests=1, output_len=(10, 10))
    spec = RunSpec(workload=wl, kernels=trees, log_dir=tmp_path / "logs")
    result = measure.run_case(ad, spec, case, min_pairs=2, max_pairs=2, aa_floor=0.5, prompt_key="k",
                              vocab_size=1000)
    assert len(result.pairs) == 2
    # 2, less the mock's fixed per-request overhead (a few to tens of ms on a busy host)
    assert 1.3 < result.ratio < 2.2, result.ratios
    assert result.tpot["candidate_p99_ms"] < result.tpot["baseline_p99_ms"]
    assert (tmp_path / "logs" / "c" / "pair1-candidate" / "server.candidate.log").exists()


def test_tensor_parallel_ranks_each_prove_the_calls(tmp_path, trees):
    result, reqs, _ = serve(tmp_path, trees, wl=workload(tensor=2), requests=2)
    measure.check_counts(result, reqs)
    lines = [json.loads(x) for x in (tmp_path / "logs" / "calls.candidate.jsonl").read_text()
             .splitlines()]
    assert {(x["rank"], x["entrypoint"]) for x in lines} == {
        (r, e) for r in (0, 1) for e in DECLARED}


# --------------------------------------------------------------------------- faults


def test_short_outputs_fail_the_count_check(tmp_path, trees):
    result, reqs, _ = serve(tmp_path, trees, ad=adapter(candidate={"MOCK_SHORT": "2"}))
    with pytest.raises(CountCheckFailed) as caught:
        measure.check_counts(result, reqs)
    assert "tokens received" in caught.value.message
    assert caught.value.failure_kind == "timing_check"


def test_a_dropped_request_fails_the_count_check(tmp_path, trees):
    result, reqs, _ = serve(tmp_path, trees, ad=adapter(candidate={"MOCK_DROP": "2"}))
    dropped = [r for r in result.requests.values() if r.completed is None]
    assert len(dropped) == 1 and dropped[0].error
    with pytest.raises(CountCheckFailed, match="5 of 6 requests completed"):
        measure.check_counts(result, reqs)


def test_a_crash_is_the_arms_fault(tmp_path, trees):
    with pytest.raises(EngineCrashed) as caught:
        serve(tmp_path, trees, ad=adapter(candidate={"MOCK_CRASH_AFTER": "2"}))
    assert "status 17" in caught.value.message
    assert caught.value.failure_kind == "crashed"
    with pytest.raises(EngineCrashed) as caught:
        serve(tmp_path, trees, arm="baseline", ad=adapter(baseline={"MOCK_CRASH_AFTER": "2"}))
    assert caught.value.failure_kind == "infra_error"


def test_a_changed_setting_is_refused(tmp_path, trees):
    with pytest.raises(SettingChanged, match="max_model_len is 4096"):
        serve(tmp_path, trees, ad=adapter(candidate={"MOCK_MAX_MODEL_LEN": "4096"}))


def test_a_server_that_never_calls_the_entrypoints_is_refused(tmp_path, trees):
    with pytest.raises(EngineProtocolError, match="no process called any entrypoint"):
        serve(tmp_path, trees, ad=adapter(candidate={"MOCK_SKIP_OPS": "1"}))


def test_token_text_instead_of_ids_is_refused(tmp_path, trees):
    with pytest.raises(EngineProtocolError, match="not an id"):
        serve(tmp_path, trees, ad=adapter(candidate={"MOCK_TOKEN_TEXT": "1"}))


def test_a_tree_that_does_not_load(tmp_path, trees):
    trees = {"candidate": write_tree(tmp_path / "bad" / "kernels", "bad", broken=True),
             "baseline": write_tree(tmp_path / "bad_base" / "kernels", "bad", broken=True)}
    with pytest.raises(KernelLoadFailed) as caught:
        serve(tmp_path, trees)
    assert caught.value.failure_kind == "compile"
    with pytest.raises(KernelLoadFailed) as caught:
        serve(tmp_path, trees, arm="baseline")
    assert caught.value.failure_kind == "task_error"


def test_an_engine_that_is_not_installed_is_a_setup_error(tmp_path, trees):
    missing = attrs.evolve(MOCK, main="no_such_engine_server")
    with pytest.raises(EngineSetupError, match="not installed"):
        serve(tmp_path, trees, ad=adapter(missing))


def test_a_patch_target_the_engine_lacks_is_a_setup_error(tmp_path, trees):
    wrong = attrs.evolve(MOCK, patches={**MOCK.patches,
                                        "rms_norm": ("fake_engine_ops:no_such_op", "same")})
    with pytest.raises(EngineSetupError, match="fake_engine_ops has no no_such_op"):
        serve(tmp_path, trees, ad=adapter(wrong))


def test_server_args_may_not_set_what_the_adapter_fixes(tmp_path, trees):
    with pytest.raises(ConfigError, match="port"):
        serve(tmp_path, trees, wl=workload(port=1234))


# --------------------------------------------------------------------------- pure parts


def test_server_arg_list_and_token_ids():
    assert server_arg_list({"max_model_len": 2048, "enforce_eager": True, "x": False,
                            "y": None, "cfg": {"a": 1}, "many": [1, 2]}) == [
        "--max-model-len", "2048", "--enforce-eager", "--cfg", '{"a":1}', "--many", "1", "2"]
    assert token_id("token_id:42") == 42 and token_id(7) == 7
    assert token_id("hello") is None and token_id(True) is None and token_id("token_id:x") is None


def test_call_log_problems(tmp_path):
    log = tmp_path / "calls.jsonl"
    assert launch.call_log_problems(log, ["rms_norm"], 1, "sha256:a") == [
        f"no call log at {log} (no process called any entrypoint)"]
    lines = [{"entrypoint": "rms_norm", "digest": "sha256:a", "pid": 1, "rank": 0},
             {"entrypoint": "rms_norm", "digest": "sha256:b", "pid": 2, "rank": 1}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines) + "garbage\n")
    assert launch.call_log_problems(log, ["rms_norm", "rotary"], 3, "sha256:a") == [
        "call log line 3 is not JSON",
        "rank 0 never called rotary",
        "rank 1 called rms_norm of another tree (digest sha256:b, expected sha256:a)",
        "rank 1 never called rotary", "rank 2 never called rms_norm", "rank 2 never called rotary"]


class Box:
    """A stand-in tensor: enough for the calling conventions."""

    def __init__(self, value):
        self.value = value

    def copy_(self, other):
        self.value = other.value if isinstance(other, Box) else other


def test_calling_conventions():
    kernel = launch.CONVENTIONS["out_first"](lambda x, w, eps: Box(x.value * w + eps), None)
    out = Box(0)
    assert kernel(out, Box(2), 3, 1) is None and out.value == 7
    fused = launch.CONVENTIONS["fused_add_in_place"](
        lambda x, r, w, eps: (Box((x.value + r.value) * w), Box(x.value + r.value)), None)
    x, r = Box(1), Box(2)
    fused(x, r, 10, 1e-6)
    assert (x.value, r.value) == (30, 3)
    keyword = launch.CONVENTIONS["out_keyword"](lambda x, w, eps=1e-6: Box(x.value + w), None)
    assert keyword(Box(1), 2).value == 3
    out = Box(0)
    assert keyword(Box(1), 2, eps=1e-5, out=out, enable_pdl=False) is out and out.value == 3


def test_the_import_hook_patches_a_module_imported_later(tmp_path, monkeypatch):
    (tmp_path / "later_engine_ops.py").write_text("def rms_norm(*a):\n    return 'engine'\n")
    tree = write_tree(tmp_path / "kernels", "t")
    (tree / "norm.py").write_text((tree / "norm.py").read_text().replace(
        "def rms_norm(*args, **kwargs):\n    return None",
        "def rms_norm(*args, **kwargs):\n    return 'kernel'"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    log = tmp_path / "calls.jsonl"
    spec = launch.Launch(kernels=str(tree), entrypoints=["rms_norm"],
                         patches={"rms_norm": ("later_engine_ops:rms_norm", "same")},
                         call_log=str(log))
    spec.install()
    try:
        import later_engine_ops

        assert later_engine_ops.rms_norm() == "kernel"
        assert later_engine_ops.rms_norm() == "kernel"
    finally:
        sys.modules.pop("later_engine_ops", None)
    lines = log.read_text().splitlines()
    assert len(lines) == 1  # on the first call only
    assert json.loads(lines[0])["entrypoint"] == "rms_norm"


def test_launch_refuses_an_entrypoint_without_a_target(tmp_path):
    with pytest.raises(ValueError, match="no patch target for entrypoint"):
        launch.Launch(kernels=str(tmp_path), entrypoints=["attention_decode"],
                      patches=launch.PATCHES["vllm"], call_log=str(tmp_path / "log"))


def test_the_builtin_path_does_not_import_httpx():
    code = ("import sys, aka_backend_e2e.adapters.builtin, aka_backend_e2e.measure, "
            "aka_backend_e2e.adapters.base; sys.exit('httpx' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_requests_serialize_as_the_protocol_says():
    assert Request(id="a", prompt=[1, 2], max_tokens=3).to_json() == {
        "id": "a", "prompt": [1, 2], "max_tokens": 3}

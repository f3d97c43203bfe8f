"""The judge's pure parts: what it accepts from a runner, how it draws held-out cases, the speed of
light, the interference verdict, confinement's allowlist. Fast; no process is started."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from aka_core.evaluation import checking, cost, evaluate, protocol, sandbox, timing
from aka_core.evaluation.judge import JudgeFailure, draw_held_out, slot_layout
from aka_core.evaluation.record import as_record
from aka_core.models import HeldOutDraws

# --------------------------------------------------------------------------- tensors from a runner


def test_a_cpu_tensor_round_trips_and_comes_back_as_a_fresh_copy() -> None:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    back = protocol.decode_cpu(protocol.encode_cpu(x))
    assert torch.equal(back, x) and back.data_ptr() != x.data_ptr()
    b16 = torch.randn(5, 7).to(torch.bfloat16)
    assert torch.equal(protocol.decode_cpu(protocol.encode_cpu(b16)), b16)


@pytest.mark.parametrize("desc, fragment", [
    ({"dtype": "float32", "shape": [2, 2], "data": base64.b64encode(b"\0" * 12).decode()},
     "needs 16 bytes, got 12"),
    ({"dtype": "object", "shape": [1], "data": ""}, "dtype 'object' is not allowed"),
    ({"dtype": "float32", "shape": [-1], "data": ""}, "non-negative ints"),
    ({"dtype": "float32", "shape": [1] * 9, "data": ""}, "at most 8"),
    ({"dtype": "float32", "shape": [1], "data": "!!not base64!!"}, "not base64"),
    ("a string", "must be a JSON object"),
])
def test_malformed_cpu_tensors_are_protocol_errors(desc: object, fragment: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=fragment.replace("(", r"\(")):
        protocol.decode_cpu(desc)


def test_gpu_descriptors_are_validated_before_any_memory_is_mapped() -> None:
    good = {"dtype": "bfloat16", "shape": [4, 8], "strides": [8, 1], "offset": 512,
            "handle": base64.b64encode(bytes(64)).decode()}
    handle, offset, dtype, shape, strides = protocol.checked_gpu_descriptor(good)
    assert (len(handle), offset, dtype, shape, strides) == (64, 512, torch.bfloat16, (4, 8), (8, 1))
    for bad, fragment in (({**good, "offset": -8}, "offset"), ({**good, "handle": "AAAA"}, "64 bytes"),
                          ({**good, "strides": [1]}, "differ in length"),
                          ({**good, "offset": True}, "offset")):
        with pytest.raises(protocol.ProtocolError, match=fragment):
            protocol.checked_gpu_descriptor(bad)


def test_only_plain_dense_outputs_are_accepted() -> None:
    assert protocol.plain_dense((4, 8), (8, 1))
    assert protocol.plain_dense((4, 1), (1, 7))  # a size-1 dimension may carry any stride
    assert not protocol.plain_dense((4, 8), (1, 4))  # a transposed view
    assert not protocol.plain_dense((4, 8), (16, 1))  # a row-strided view of a bigger buffer


def test_line_reader_caps_a_reply_without_a_newline() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"x" * 5000)
    reader = protocol.LineReader(read_fd, limit=4096)
    with pytest.raises(protocol.ProtocolError, match="exceeds 4096 bytes"):
        reader.read(timeout=2)
    os.close(write_fd)
    os.close(read_fd)


def test_line_reader_rejects_non_objects_and_times_out() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"[1, 2]\n")
    reader = protocol.LineReader(read_fd)
    with pytest.raises(protocol.ProtocolError, match="not a JSON object"):
        reader.read(timeout=2)
    with pytest.raises(protocol.RunnerGone) as gone:
        reader.read(timeout=0.2)
    assert gone.value.timed_out
    os.close(write_fd)
    with pytest.raises(protocol.RunnerGone, match="closed its pipe"):
        reader.read(timeout=2)
    os.close(read_fd)


# --------------------------------------------------------------------------- cases and costs


def test_held_out_draws_follow_the_ranges_and_depend_on_the_secret() -> None:
    draws = HeldOutDraws(count=3, params={"M": {"range": [100, 200]},
                                          "N": {"range": [1000, 2000], "multiple_of": 64},
                                          "dtype": {"choice": ["float16", "bfloat16"]},
                                          "eps": 1e-6})
    first = draw_held_out(draws, 1)
    assert [c.name for c in first] == ["held_out_0", "held_out_1", "held_out_2"]
    for case in first:
        assert 100 <= case.params["M"] <= 200
        assert 1000 <= case.params["N"] <= 2000 and case.params["N"] % 64 == 0
        assert case.params["dtype"] in ("float16", "bfloat16") and case.params["eps"] == 1e-6
    assert draw_held_out(draws, 1) == first, "the same secret draws the same cases"
    assert any(draw_held_out(draws, s) != first for s in range(2, 6)), "draws depend on the secret"


def test_cost_expressions_are_evaluated_without_eval() -> None:
    params = {"M": 8192, "N": 16384, "dtype": "bfloat16"}
    assert cost.evaluate("2 * M * N * bytes_of(dtype)", params) == 2 * 8192 * 16384 * 2
    assert cost.evaluate("max(M, N) // 2 + ceil(M / 3)", params) == 8192 + 2731
    for bad, fragment in (("__import__('os')", "may be called"), ("M.bit_length()", "may be called"),
                          ("[M]", "List"), ("K * 2", "unknown name 'K'"), ("M ** 999", "too large"),
                          ("bytes_of('float99')", "unknown dtype")):
        with pytest.raises(cost.CostError, match=fragment):
            cost.evaluate(bad, params)


def test_speed_of_light_is_the_larger_of_memory_and_arithmetic_time() -> None:
    params = {"M": 1000, "N": 1000}
    # 4 MB at 4 TB/s is 1 us; 2 GFLOP at 1 PFLOP/s is 2 us.
    assert cost.speed_of_light_ms("4 * M * N", "2000 * M * N", params, 4e12, 1e15) == pytest.approx(
        0.002)
    assert cost.speed_of_light_ms(None, None, params, 4e12, 1e15) is None


def test_slot_layout_aligns_tensors_and_keeps_values_as_json() -> None:
    inputs = {"x": torch.empty(3, 5, dtype=torch.float16), "eps": 1e-5}
    with pytest.raises(JudgeFailure, match="inputs factory must put tensors on the device"):
        slot_layout(inputs, 256)
    assert slot_layout({"eps": 1e-5, "mode": "fast"}, 256) == (
        {"eps": {"value": 1e-5}, "mode": {"value": "fast"}}, 256)


# --------------------------------------------------------------------------- verdicts


def test_interference_fails_the_candidate_only_when_it_is_large() -> None:
    copies = {"baseline": 1.0, "candidate": 1.0}
    timing.check_interference("c", 1.01, 1.01, 1.0, copies)  # drift: fine
    with pytest.raises(JudgeFailure) as small:
        timing.check_interference("c", 1.05, 1.05, 1.0, copies)
    assert small.value.kind == "infra_error" and "retry" in str(small.value)
    # The retry says why and on which memory the baseline was timed alone: the reward service
    # blames a candidate that reads this on the same memory in every attempt.
    assert small.value.details == {"cause": "interference_band", "placement": "new", "case": "c"}
    with pytest.raises(JudgeFailure) as same:
        timing.check_interference("c", 1.05, 1.05, 1.0, copies, placement="same")
    assert same.value.kind == "infra_error" and same.value.details["placement"] == "same"
    with pytest.raises(JudgeFailure) as large:
        timing.check_interference("c", 1.5, 1.5, 1.0, copies)
    assert large.value.kind == "interference"
    with pytest.raises(JudgeFailure, match="held the GPU while its inputs were written"):
        timing.check_interference("c", 1.0, 1.0, 1.0, {"baseline": 1.0, "candidate": 2.0})


@pytest.mark.parametrize("kind, compiled, correct", [
    ("compile", False, None), ("task_error", None, None), ("infra_error", None, None),
    ("correctness", True, False), ("precision", True, False), ("timing_check", True, True),
    ("interference", True, True), ("impossible_time", True, True), ("resources", True, True),
])
def test_outcome_of_each_failure_kind(kind: str, compiled: object, correct: object) -> None:
    record = {"failure": {"kind": kind, "phase": "timing"}, "correctness": {"passed": True}}
    gates = evaluate.outcome(as_record(record))
    assert (gates.pass_compilation, gates.pass_correctness) == (compiled, correct)
    assert gates.performance_measured is False and gates.speedup is None
    assert gates.infra_error == (kind == "infra_error")


@pytest.mark.parametrize("kind", ["crashed", "timeout"])
def test_a_crash_while_building_fails_the_build_and_in_the_first_call_the_run(kind: str) -> None:
    building = {"failure": {"kind": kind, "phase": "compile"}}
    first_call = {"failure": {"kind": kind, "phase": "compile", "stage": "first_call"}}
    built, called = evaluate.outcome(as_record(building)), evaluate.outcome(as_record(first_call))
    assert (built.pass_compilation, built.pass_correctness) == (False, None)
    assert (called.pass_compilation, called.pass_correctness) == (True, False)


def test_rounding_mismatch_separates_float32_from_float16_arithmetic() -> None:
    torch.manual_seed(0)
    x = (torch.randn(200_000) * 2).to(torch.bfloat16).float()
    reference = torch.nn.functional.gelu(x, approximate="tanh")
    fp32 = x / (1 + torch.exp(-1.5957691216057308 * (x + 0.044715 * x ** 3)))
    h = x.half()
    fp16 = (h / (1 + torch.exp(-1.5957691216057308 * (h + 0.044715 * h ** 3)))).float()
    as_bf16 = [t.to(torch.bfloat16) for t in (fp32, fp16)]
    assert checking.rounding_mismatch([as_bf16[0]], [reference]) < 0.05
    assert checking.rounding_mismatch([as_bf16[1]], [reference]) > 0.10


# --------------------------------------------------------------------------- confinement


def test_carve_leaves_out_protected_folders_and_keeps_their_siblings(tmp_path: Path) -> None:
    for sub in ("repo/aka_core", "repo/tasks/a", "repo/tests/solutions", "repo/docs", "other"):
        (tmp_path / sub).mkdir(parents=True)
    allowed = sandbox.carve([str(tmp_path)], [str(tmp_path / "repo" / "tasks"),
                                              str(tmp_path / "repo" / "tests")])
    assert allowed == sorted(str(tmp_path / p) for p in ("other", "repo/aka_core", "repo/docs"))
    assert sandbox.carve([str(tmp_path / "repo" / "tasks")], [str(tmp_path / "repo")]) == []


def test_a_spec_allows_the_side_and_python_but_not_protected_folders(tmp_path: Path) -> None:
    side = tmp_path / "run" / "workspace"
    side.mkdir(parents=True)
    spec = sandbox.build_spec(scratch=tmp_path / "scratch", read=[str(side)],
                              protected=[str(tmp_path / "run"), str(Path.home())])
    assert str(side.resolve()) in spec.read, "the side's own folder is readable"
    assert not any(p == str((tmp_path / "run").resolve()) for p in spec.read)
    import sys

    assert any(sys.prefix.startswith(p) or p.startswith(sys.prefix) for p in spec.read)
    assert spec.write == (str(tmp_path / "scratch"),)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32])
def test_failure_flags_agree_with_the_detailed_comparison(dtype: torch.dtype) -> None:
    """The audits' one-wait check must fail exactly where compare() fails."""
    from aka_core.models import Tolerance

    gen = torch.Generator().manual_seed(3)
    ref = (torch.randn(4096, generator=gen, dtype=torch.float64) * 4)
    if not dtype.is_floating_point:
        ref = ref.round()
    tol = (Tolerance(rtol=1e-2, atol=1e-2, max_rel_l2=5e-3) if dtype.is_floating_point
           else checking.EXACT)
    good = ref.to(dtype)
    variants = {"good": good, "one_off": good.clone(), "shape": good[:-1]}
    variants["one_off"][7] += 1
    if dtype.is_floating_point:
        nan_ref = ref.clone()
        nan_ref[3] = float("nan")
        nan_ref[5] = float("inf")
        variants.update(nan_both=(nan_ref.to(dtype), nan_ref), nan_out=good.clone(),
                        inf_sign=(nan_ref.to(dtype).clone(), nan_ref),
                        drift=(good.double() * 1.006).to(dtype))
        variants["nan_out"][9] = float("nan")
        variants["inf_sign"][0][5] = float("-inf")
    seen = set()
    for name, item in variants.items():
        out, r = item if isinstance(item, tuple) else (item, ref)
        expected = checking.compare(out, r, tol)["passed"] if out.shape == r.shape else False
        flag = checking.read_flags([checking.failure_flag(out, r, tol)])[0]
        assert flag is (not expected), name
        seen.add(expected)
    assert seen == {True, False}


def test_bytes_differ_flags_are_read_in_one_go() -> None:
    a = torch.arange(10, dtype=torch.float32)
    b = a.clone()
    c = a.clone()
    c[4] = -0.0 if a[4] == 0 else -a[4]
    assert checking.read_flags([checking.bytes_differ_flag(a, b),
                                checking.bytes_differ_flag(a, c)]) == [False, True]
    assert checking.read_flags([]) == []
    # Compared in 8-byte words where the bytes allow it, byte by byte where they do not: a
    # single changed byte is found either way (an unaligned view, an odd length, half floats).
    arena = torch.zeros(4097, dtype=torch.uint8)
    for view in (arena[1:4097], arena[0:4096], arena[0:4095]):
        other = view.clone()
        assert not checking.read_flags([checking.bytes_differ_flag(view, other)])[0]
        other[view.numel() - 1] = 7
        assert checking.read_flags([checking.bytes_differ_flag(view, other)]) == [True]
    half = torch.zeros(3, dtype=torch.float16)
    flipped = half.clone()
    flipped[2] = -0.0
    assert checking.read_flags([checking.bytes_differ_flag(half, flipped)]) == [True]


def test_a_process_tree_is_found_frozen_and_thawed_top_down() -> None:
    import signal
    import subprocess
    import sys
    import time

    from aka_core import processes
    from aka_core.testing.processes import wait_for

    script = ("import subprocess, sys, time\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
              "start_new_session=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        below = wait_for(lambda: processes.descendants(proc.pid), 30, "the grandchild")
        assert len(below) == 1
        assert processes._scan_children(proc.pid) == below, "the fallback finds the same child"
        frozen = processes.signal_tree(proc.pid, signal.SIGSTOP)
        assert frozen == [proc.pid, *below]

        def state(pid: int) -> str:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

        wait_for(lambda: all(state(p) == "T" for p in frozen) or None, 10, "stopped processes")
        processes.signal_pids(frozen, signal.SIGCONT)
        time.sleep(0.05)
        wait_for(lambda: all(state(p) == "S" for p in frozen) or None, 10, "running processes")
    finally:
        for pid in [*processes.descendants(proc.pid), proc.pid]:
            os.kill(pid, signal.SIGKILL)
        proc.wait()


def bare_runner() -> tuple[Any, Any]:
    """A ``RunnerProcess`` with no process, its descriptor socket's other end."""
    import socket
    import threading

    from aka_core.evaluation.sides import RunnerProcess

    runner = RunnerProcess.__new__(RunnerProcess)
    runner.side = "candidate"
    runner.cmd_fd = 99  # not closed
    runner._fd_lock, runner._fds_due = threading.Lock(), 0
    runner.fd_socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return runner, theirs


def test_memory_files_sent_unasked_are_drained_and_stop_the_side() -> None:
    """A memory file a runner sends on its descriptor socket and closes is held by the queue,
    in no process's size: outside a setup, the judge drains it (freeing it) and names it."""
    import socket
    import threading

    from aka_core.evaluation.sides import queued_bytes

    runner, theirs = bare_runner()
    assert runner.unasked() is None  # nothing queued
    memory = os.memfd_create("weights")
    os.write(memory, b"\1" * (1 << 20))
    socket.send_fds(theirs, [b"x"], [memory])
    os.close(memory)
    runner._fds_due = 1  # a setup asked for one: the judge's receive is left to take it
    assert runner.unasked() is None and queued_bytes(runner.fd_socket) == 1
    runner._fds_due = 0
    runner.fd_socket.settimeout(600)  # as ``receive_fd`` leaves it: the drain must not wait
    answers: list[str | None] = []
    drain = threading.Thread(target=lambda: answers.append(runner.unasked()), daemon=True)
    drain.start()
    drain.join(30)
    assert answers, "the drain waited for more on a socket with a timeout"
    message = answers[0]
    assert runner.fd_socket.gettimeout() == 600
    assert message is not None and "1 file descriptor (1.0 MiB in their files) and 1 byte on" in message
    assert queued_bytes(runner.fd_socket) == 0 and runner.unasked() is None
    theirs.close()
    runner.fd_socket.close()


def test_memory_descriptors_come_with_their_tag_or_not_at_all(tmp_path: Path) -> None:
    """The judge takes exactly one descriptor carrying the tag the runner's reply named."""
    import socket

    from aka_core.evaluation.sides import SideFailure

    runner, theirs = bare_runner()
    target = tmp_path / "memory"
    target.write_bytes(b"x")
    with open(target, "rb") as handle:
        socket.send_fds(theirs, [b"arena-1"], [handle.fileno()])
        fd = runner.receive_fd("arena-1")
        assert os.read(fd, 1) == b"x"
        os.close(fd)
        socket.send_fds(theirs, [b"arena-7"], [handle.fileno(), handle.fileno()])
        with pytest.raises(SideFailure, match="expected one tagged 'arena-2'"):
            runner.receive_fd("arena-2")
    with pytest.raises(SideFailure, match="no memory descriptor"):
        runner.receive_fd("arena-3", timeout=0.2)
    theirs.close()
    runner.fd_socket.close()


def test_a_held_out_seed_gives_every_candidate_the_same_shapes_and_stays_out_of_the_record() -> None:
    import attrs

    from aka_core.evaluation.judge import Judge
    from aka_core.evaluation.request import EvaluationRequest, SideRef
    from aka_core.models import Case

    side = SideRef(root="/nonexistent", ref="k.py:f")
    draws = HeldOutDraws(count=2, params={"M": {"range": [1, 10**6]}})
    request = EvaluationRequest(task_id="t", backend="triton", reference=side, inputs=side,
                                baseline=side, candidate=side, cases=(Case(name="a", params={}),),
                                tolerance={}, device="cpu", held_out_draws=draws)

    def shapes(**fields: object) -> list[object]:
        judge = Judge(attrs.evolve(request, **fields), channel=None)  # type: ignore[arg-type]
        assert judge.req.secret_seed == 0 and judge.req.held_out_seed is None
        return [c.params for c in judge.held_out_cases]

    assert shapes(secret_seed=1, held_out_seed=7) == shapes(secret_seed=2, held_out_seed=7)
    assert shapes(secret_seed=1, held_out_seed=7) != shapes(secret_seed=1, held_out_seed=8)
    assert shapes(secret_seed=1) != shapes(secret_seed=2), "without a seed: the secret draws"


def test_a_runner_lost_before_loading_its_code_is_the_evaluators_fault() -> None:
    from aka_core.evaluation.judge import INFRA, Judge
    from aka_core.evaluation.request import EvaluationRequest, SideRef
    from aka_core.evaluation.sides import SideFailure
    from aka_core.models import Case

    side = SideRef(root="/nonexistent", ref="k.py:f")
    judge = Judge(EvaluationRequest(task_id="t", backend="triton", reference=side, inputs=side,
                                    baseline=side, candidate=side,
                                    cases=(Case(name="a", params={}),), tolerance={},
                                    device="cpu"), channel=None)  # type: ignore[arg-type]
    killed = SideFailure("crashed", "the candidate runner exited (killed by SIGKILL)")
    assert judge.side_failure("candidate", killed, "startup").kind == INFRA
    assert judge.side_failure("candidate", killed, "compile").kind == "crashed"


class _GoneRunner:
    """A runner a watch killed (``over_limit``), whose pipe is closed."""

    def __init__(self, side: str, cause: str) -> None:
        self.side, self.over_limit, self.over_cause, self.dead = side, "it held 9 GiB", cause, False
        self.log_path = Path("/nonexistent/runner.log")

    def send(self, **message: object) -> None:
        from aka_core.evaluation.sides import RunnerProcess

        raise RunnerProcess._gone(self, "the pipe is closed")  # type: ignore[arg-type]


@pytest.mark.parametrize("cause", ["memory_limit", "disk_limit"])
def test_a_request_to_a_side_a_watch_killed_is_its_failure_in_any_phase(cause: str) -> None:
    # Its builder's code may have run (GPU hosts build ahead) before the runner loaded any: the
    # request that finds it gone is judged as the watch's verdict, never as the judge's fault.
    from aka_core.evaluation.judge import Judge, JudgeFailure
    from aka_core.evaluation.request import EvaluationRequest, SideRef
    from aka_core.models import Case

    side = SideRef(root="/nonexistent", ref="k.py:f")
    judge = Judge(EvaluationRequest(task_id="t", backend="triton", reference=side, inputs=side,
                                    baseline=side, candidate=side,
                                    cases=(Case(name="a", params={}),), tolerance={},
                                    device="cpu"), channel=None)  # type: ignore[arg-type]
    judge.runners = {s: _GoneRunner(s, cause) for s in ("baseline", "candidate")}  # type: ignore[misc]
    for phase in ("startup", "correctness"):
        with pytest.raises(JudgeFailure) as caught:
            judge._send("candidate", "load", phase)
        assert caught.value.kind == "resources" and "it held 9 GiB" in str(caught.value)
        assert caught.value.details["cause"] == cause
        with pytest.raises(JudgeFailure) as caught:
            judge._send("baseline", "load", phase)
        assert caught.value.kind == "task_error"


# --------------------------------------------------------------------------- sampled timed audits


def test_audit_positions_come_from_the_seed_and_small_outputs_are_read_whole() -> None:
    structure = [((512, 1024), torch.bfloat16), ((64,), torch.float32)]
    a = checking.sample_positions(structure, 7, "cpu", 4096)
    b = checking.sample_positions(structure, 7, "cpu", 4096)
    c = checking.sample_positions(structure, 8, "cpu", 4096)
    assert a[1] is None and b[1] is None
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[0].numel() == 4096 and int(a[0].min()) >= 0 and int(a[0].max()) < 512 * 1024
    # Spread over the whole output, not one corner of it.
    assert int(a[0].max()) > 0.9 * 512 * 1024 and int(a[0].min()) < 0.1 * 512 * 1024


def test_a_sampled_audit_passes_the_right_output_and_catches_work_skipped_on_a_sliver() -> None:
    structure = [((1024, 1024), torch.float32)]
    ref = torch.randn(1024, 1024)
    tol = {"float32": checking.Tolerance(rtol=1e-5, atol=1e-5)}
    positions = checking.sample_positions(structure, 11, "cpu", timing.AUDIT_SAMPLE)
    honest = checking.take([ref.clone()], positions)
    expected = checking.take([ref], positions)
    assert not any(checking.read_flags(checking.output_failure_flags(honest, expected, tol)))
    skipped = ref.clone()
    skipped[:2] = 0  # two rows of 1024 (0.2% of the elements) left unwritten
    taken = checking.take([skipped], positions)
    assert any(checking.read_flags(checking.output_failure_flags(taken, expected, tol)))
    assert "outside" in checking.compare_outputs(taken, expected, tol)["reason"]


def test_outputs_no_larger_than_the_sample_are_compared_whole() -> None:
    out = torch.arange(10.0)
    taken = checking.take([out], [None])
    assert torch.equal(taken[0], out) and taken[0].data_ptr() != out.data_ptr()


def test_a_sampled_audit_loosens_only_the_relative_l2_bound_and_only_slightly() -> None:
    tols = {"bfloat16": checking.Tolerance(rtol=1.6e-2, atol=2e-3, max_rel_l2=8e-3),
            "float32": checking.Tolerance(rtol=1e-5, atol=1e-6)}
    loose = checking.with_l2_slack(tols, timing.AUDIT_L2_SLACK)
    assert loose["bfloat16"].rtol == 1.6e-2 and loose["bfloat16"].atol == 2e-3
    assert loose["bfloat16"].max_rel_l2 == pytest.approx(8e-3 * timing.AUDIT_L2_SLACK)
    assert 1.0 < timing.AUDIT_L2_SLACK <= 1.1
    assert loose["float32"] == tols["float32"]


def test_a_block_that_never_arms_says_what_blocks_it() -> None:
    """A runner that does not answer "arm" in time: the message names the usual causes (a call
    that waits for the GPU, too many launches queued behind the start signal)."""
    from aka_core.evaluation import protocol
    from aka_core.evaluation.sides import RunnerProcess, SideFailure

    class NeverAnswers:
        def read(self, timeout: float) -> dict:
            raise protocol.RunnerGone("no answer", timed_out=True)

    runner = RunnerProcess.__new__(RunnerProcess)
    runner.side, runner.replies, runner.op_stats = "baseline", NeverAnswers(), {}
    with pytest.raises(SideFailure) as arm:
        runner.read(30.0, "arm")
    assert arm.value.kind == "timeout"
    assert "did not answer within 30 s (arm)" in str(arm.value)
    assert "torch.nonzero" in str(arm.value) and "launch queue" in str(arm.value)
    with pytest.raises(SideFailure) as other:
        runner.read(30.0, "capture")
    assert "launch queue" not in str(other.value)


def test_a_case_whose_baseline_cannot_enqueue_a_block_is_timed_again_with_smaller_blocks() -> None:
    # The GPU path (releasing the held block) needs a GPU; the retry around it does not.
    timer = object.__new__(timing.CaseTimer)
    timer.record, timer.slots = {"case": "c"}, {}
    caps: list[int] = []

    def run_blocks(cap: int) -> dict[str, object]:
        caps.append(cap)
        if cap > 31:
            raise timing.LaunchQueueFull("baseline", min(cap, 250))
        return {"case": "c", "calls_per_block": cap}

    timer.run_blocks = run_blocks  # type: ignore[method-assign]
    record = timer.run()
    assert caps == [timing.MAX_CALLS, 31]
    assert timer.record["launch_queue"] == [{"side": "baseline", "calls_per_block": 250}]
    assert record["calls_per_block"] == 31
    assert timer.windows == {"baseline": [], "candidate": []}  # started again from nothing



def _graph_timer(per_call_ms: float, captures: list[bool], count: int = 400,
                 baseline_ms: float | None = None) -> timing.CaseTimer:
    """A case timer whose GPU steps are stand-ins: graph blocks of ``per_call_ms`` per call
    (the baseline's: ``baseline_ms``, default the same) on top of a 0.3 ms hand-off;
    ``captures`` says, per capture, whether the candidate's succeeds."""
    from aka_core.models import TimingPolicy

    timer = object.__new__(timing.CaseTimer)
    timer.record, timer.policy = {"case": "c"}, TimingPolicy()
    timer.mode = {"baseline": "graph", "candidate": "graph"}
    timer.count, timer.allocations, timer.timed_at = count, [], []
    timer.counts = {"baseline": count, "candidate": count}
    timer.fresh_inputs = lambda pair: [{}] * timer.count  # type: ignore[method-assign]
    call_ms = {"candidate": per_call_ms, "baseline": baseline_ms or per_call_ms}

    def block(side: str, inputs: object, audit: bool = True) -> float:
        timer.timed_at.append(timer.counts[side])
        return 0.3 + timer.counts[side] * call_ms[side]

    def allocate(size: int, baseline: int | None = None, placements: int = 1) -> None:
        timer.count = size
        timer.counts = {"candidate": size, "baseline": min(size, baseline or size)}
        timer.allocations.append(size if baseline in (None, size) else (size, baseline))

    def choose_mode() -> None:
        timer.mode["baseline"] = "graph"
        if captures.pop(0):
            timer.mode["candidate"] = "graph"
        else:
            timer.record["candidate_method"] = "eager"

    timer.block = block  # type: ignore[method-assign]
    timer.allocate, timer.choose_mode = allocate, choose_mode  # type: ignore[method-assign]
    timer.slots, timer.free_memory = {}, lambda: 1 << 40  # type: ignore[method-assign]
    timer.placements_that_fit = lambda *args: 1  # type: ignore[method-assign]
    return timer


def test_graph_blocks_of_microsecond_calls_grow_to_the_aimed_window() -> None:
    # A 1.9 us call whose eager estimate gave 100 calls (0.19 ms): replays size it to 2 ms.
    timer = _graph_timer(0.0019, [True], count=100)
    count = timer.fit_graph_blocks(100, timing.MAX_CALLS, 0.3)
    assert count == timer.count == 1053 and timer.allocations == [1053]
    assert set(timer.timed_at) == {100}  # timed at the size it was captured at
    assert timer.record["graph_resized"] == {"from": 100, "to": 1053, "baseline_to": 1053,
                                             "replayed_call_ms": 0.0019}
    assert timer.mode == {"baseline": "graph", "candidate": "graph"}


def test_a_noisy_estimate_at_the_cap_is_timed_small_first_and_shrinks() -> None:
    # The eager estimate said 2000 calls; nothing is replayed at that size before it is sized.
    timer = _graph_timer(0.0019, [True, True], count=2000)
    assert timer.fit_graph_blocks(2000, timing.MAX_CALLS, 0.3) == 1053
    assert set(timer.timed_at) == {timing.FIT_CALLS}
    assert timer.allocations == [timing.FIT_CALLS, 1053]


def test_graph_blocks_are_bounded_by_memory_and_skipped_where_estimates_hold() -> None:
    timer = _graph_timer(0.0019, [True], count=100)
    assert timer.fit_graph_blocks(100, 600, 0.3) == 600  # what memory allows, no more
    near = _graph_timer(0.0165, [True], count=100)  # 122 calls: within 25%, not recaptured
    assert near.fit_graph_blocks(100, timing.MAX_CALLS, 0.3) == 100 and not near.allocations
    eager = _graph_timer(0.0019, [])
    eager.mode["candidate"] = "eager"  # an eager side keeps the sizes its launches allow
    assert eager.fit_graph_blocks(400, timing.MAX_CALLS, 0.3) == 400 and not eager.allocations
    longer = _graph_timer(0.05, [])  # 40 calls of 50 us: the eager estimate holds
    assert longer.fit_graph_blocks(40, timing.MAX_CALLS, 0.3) == 40 and not longer.timed_at


def test_a_candidate_that_cannot_replay_the_new_block_keeps_the_old_one() -> None:
    timer = _graph_timer(0.0019, [False, True], count=100)
    assert timer.fit_graph_blocks(100, timing.MAX_CALLS, 0.3) == 100
    assert timer.allocations == [1053, 100]
    assert timer.record["graph_resized"]["kept"] == 100
    assert "candidate_method" not in timer.record
    assert timer.mode == {"baseline": "graph", "candidate": "graph"}
    small = _graph_timer(0.0019, [False, True], count=2000)  # not even the small block
    assert small.fit_graph_blocks(2000, timing.MAX_CALLS, 0.3) == 2000
    assert small.allocations == [timing.FIT_CALLS, 2000] and not small.timed_at


def test_a_candidate_slow_in_the_sizing_replays_cannot_shrink_the_blocks() -> None:
    """Fewer calls per block would weigh the hand-off's error more: the blocks are sized on the
    faster side, so a candidate stalling in the (unaudited) sizing replays changes nothing."""
    timer = _graph_timer(0.0019, [True], count=100)
    honest = timer.block

    def block(side: str, inputs: object, audit: bool = True) -> float:
        window = honest(side, inputs, audit)
        return window * 100 if side == "candidate" else window

    timer.block = block  # type: ignore[method-assign]
    assert timer.fit_graph_blocks(100, timing.MAX_CALLS, 0.3) == 1053


def test_a_capture_is_primed_with_one_set_of_inputs_made_once(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Primed slots are never timed or audited: one call's inputs, made once, fill every slot
    (making a block's worth was most of the timing phase's GPU time on large cases)."""
    class Judge:
        timing_root, made = 7, []

        def inputs_for(self, case: object, seed: int) -> dict[str, torch.Tensor]:
            self.made.append(seed)
            return {"x": torch.full((3,), float(len(self.made)))}

    class Slots:
        placements = 2

        def __init__(self) -> None:
            self.arena = torch.zeros(2 * 5 * 3)

        def inputs_of(self, placement: int) -> torch.Tensor:
            return self.arena[15 * placement: 15 * placement + 15]

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    timer = object.__new__(timing.CaseTimer)
    timer.judge, timer.case, timer.references = Judge(), type("Case", (), {"name": "c"}), {0: []}
    timer.region, timer.counts = 3, {"baseline": 5, "candidate": 5}
    timer.stage = torch.zeros(5 * 3)
    timer.stage_views = [{"x": timer.stage[3 * j: 3 * j + 3]} for j in range(5)]
    timer.slots = {"baseline": Slots(), "candidate": Slots()}
    timer.prime("baseline", "candidate")
    assert len(Judge.made) == 1 and timer.references == {}
    for side in ("baseline", "candidate"):  # every placement's slots
        assert torch.equal(timer.slots[side].arena, torch.ones(30))
    timer.stage.fill_(2.0)
    timer.prime("baseline", fresh=False)  # the stage as it is: nothing made
    assert len(Judge.made) == 1 and torch.equal(timer.slots["baseline"].arena,
                                                torch.full((30,), 2.0))


def test_the_clean_phase_makes_one_set_of_fresh_inputs_for_all_its_blocks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Judge:
        requests: list[str] = []

        def _request(self, side: str, op: str, phase: str, **fields: object) -> dict[str, object]:
            self.requests.append(op)
            return {}

    opened: list[list[str]] = []
    released: list[list[str]] = []
    monkeypatch.setattr(timing, "open_slots", lambda judge, plans: opened.append(
        [p.side for p in plans]) or {p.side: type("Slots", (), {"placements": 1})()
                                     for p in plans})
    monkeypatch.setattr(timing, "release_slots",
                        lambda judge, slots: released.append(list(slots)))
    timer = object.__new__(timing.CaseTimer)
    timer.judge, timer.layout, timer.region, timer.count, timer.out_aligned = Judge(), {}, 64, 9, 0
    timer.counts = {"baseline": 4, "candidate": 9}  # the stage shrinks to the baseline's calls
    timer.mode, timer.slots = {"baseline": "graph", "candidate": "graph"}, {}
    timer.kept, timer.stages = None, {}  # nothing set aside: new slots, a new capture
    made: list[int] = []
    primed: list[tuple[tuple[str, ...], bool]] = []
    blocks: list[tuple[bool, bool, object]] = []
    timer.make_stage = lambda: None  # type: ignore[method-assign]
    timer.fresh_inputs = lambda pair: made.append(pair) or [{}] * 4  # type: ignore[method-assign]
    timer.prime = lambda *sides, fresh=True: primed.append((sides, fresh))  # type: ignore[method-assign]

    def block(side: str, inputs: object, *, touch: bool = False, audit: bool = True) -> float:
        blocks.append((touch, audit, inputs))
        return 0.3 if touch else 2.3

    timer.block = block  # type: ignore[method-assign]
    clean = timer.clean()
    assert made == [10_000] and primed == [(("baseline",), False)]
    assert Judge.requests == ["capture"]
    timed = [b for b in blocks if not b[0]]
    assert len(timed) == timing.CLEAN_BLOCKS and len({id(b[2]) for b in timed}) == 1
    assert [b[1] for b in timed] == [True] + [False] * (timing.CLEAN_BLOCKS - 1)
    assert clean["windows_ms"] == [2.3] * timing.CLEAN_BLOCKS
    assert len(clean["touch_windows_ms"]) == timing.CLEAN_BLOCKS + 1
    assert timer.count == 4
    assert opened == [["baseline"]] and released == [["baseline"]] and timer.slots == {}


def test_each_side_is_timed_on_blocks_of_its_own_work() -> None:
    """A baseline 10x slower than the candidate gets blocks of a tenth as many calls (each side
    about ``block_ms``); the candidate's blocks stay sized on the faster side's call."""
    timer = _graph_timer(0.0019, [True], count=100, baseline_ms=0.019)
    assert timer.fit_graph_blocks(100, timing.MAX_CALLS, 0.3) == 1053
    assert timer.allocations == [(1053, 106)]
    assert timer.record["graph_resized"]["baseline_to"] == 106
    capped = _graph_timer(0.0019, [True], count=100, baseline_ms=0.019)
    assert capped.fit_graph_blocks(100, 300, 0.3) == 300  # memory (or a launch-queue cap)
    assert capped.counts == {"candidate": 300, "baseline": 106}
    # Slower in the sizing replays, the candidate still gets the faster side's blocks.
    slow = _graph_timer(0.019, [True], count=100, baseline_ms=0.0019)
    assert slow.fit_graph_blocks(100, timing.MAX_CALLS, 0.3) == 1053
    assert slow.counts == {"candidate": 1053, "baseline": 1053}
    timer.windows = {"baseline": [0.3 + 106 * 0.019], "candidate": [0.3 + 1053 * 0.0019]}
    baseline, candidate = timer.samples(0.3)
    assert baseline == pytest.approx([0.019]) and candidate == pytest.approx([0.0019])


def test_the_candidates_audited_call_is_drawn_from_its_whole_block(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline's block calls the first of the pair's inputs; the candidate's drawn call must
    still range over all of its own calls, or the calls past the baseline's would go unaudited."""
    import random

    monkeypatch.setattr(checking, "sample_positions", lambda *args: [])

    class Judge:
        timing_root = 3

        def inputs_for(self, case: object, seed: int) -> dict[str, torch.Tensor]:
            return {"x": torch.zeros(1)}

    timer = object.__new__(timing.CaseTimer)
    timer.judge, timer.case, timer.rng = Judge(), type("Case", (), {"name": "c"}), random.Random(1)
    timer.expected, timer.count = [], 40
    timer.counts = {"baseline": 4, "candidate": 40}
    timer.stage_views = [{"x": torch.zeros(1)} for _ in range(40)]
    drawn = {"baseline": set(), "candidate": set()}
    for pair in range(200):
        timer.fresh_inputs(pair)
        for side in drawn:
            drawn[side].add(timer.drawn[side])
        # The baseline audits the candidate's drawn call where its own block has it.
        assert timer.drawn["baseline"] == (timer.drawn["candidate"]
                                           if timer.drawn["candidate"] < 3 else None)
    assert drawn["baseline"] == {0, 1, 2, None}
    assert drawn["candidate"] == set(range(39))


def test_the_input_copy_check_compares_blocks_of_different_sizes_per_call() -> None:
    """The candidate's block copies 10x the baseline's inputs: its copy is held against the
    baseline's copy per call times its own calls (plus the flush), not against the raw copy."""
    timer = object.__new__(timing.CaseTimer)
    timer.counts = {"baseline": 2, "candidate": 20}
    timer.copy_ms = {"baseline": [1.05, 1.04, 1.06], "candidate": [10.1, 10.0, 10.2]}
    timer.flush_ms = {"baseline": [0.05] * 3, "candidate": [0.05] * 3}
    copies = timer.copies_for_the_candidates_block()
    assert copies["baseline"] == pytest.approx(0.05 + 0.5 * 20)
    timing.check_interference("c", 1.0, 1.0, 1.0, copies)  # an honest candidate passes
    timer.copy_ms["candidate"] = [13.0] * 3  # its process held the GPU during its copies
    with pytest.raises(JudgeFailure) as held:
        timing.check_interference("c", 1.0, 1.0, 1.0, timer.copies_for_the_candidates_block())
    assert held.value.kind == "interference"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int32])
def test_the_quick_comparison_passes_only_what_the_exact_one_passes(dtype: torch.dtype) -> None:
    """compare() passes in one float32 pass only outputs clearly inside their bounds; near the
    bounds, and wherever an output fails, the float64 comparison decides, so the verdict is
    always the exact one's."""
    from aka_core.models import Tolerance

    gen = torch.Generator().manual_seed(11)
    ref = torch.randn(8192, generator=gen, dtype=torch.float64) * 3
    if not dtype.is_floating_point:
        ref = ref.round()
    tol = (Tolerance(rtol=1e-2, atol=1e-3, max_rel_l2=4e-3) if dtype.is_floating_point
           else Tolerance(rtol=0.0, atol=1.0))
    bound = tol.atol + tol.rtol * ref.abs()
    quick = exact_only = 0
    for trial in range(40):
        # Errors from well inside the bounds to just outside them, on every element or a few.
        scale = 0.2 + 0.9 * trial / 39
        noise = (torch.rand(8192, generator=gen, dtype=torch.float64) * 2 - 1) * bound * scale
        if trial % 3 == 0:
            noise[torch.randperm(8192, generator=gen)[:8192 - 5]] = 0.0
        out = (ref + noise).to(dtype)
        verdict = checking.exact_compare(out, ref, tol)["passed"]
        fast = checking.quick_pass(out, ref, tol)
        assert checking.compare(out, ref, tol)["passed"] is verdict, trial
        if fast is not None:
            assert verdict, f"the quick pass accepted what the exact comparison fails ({trial})"
            exact = checking.exact_compare(out, ref, tol)
            assert fast["rel_l2"] == pytest.approx(exact["rel_l2"], rel=1e-4, abs=1e-12)
            assert fast["max_abs_err"] == pytest.approx(exact["max_abs_err"], rel=1e-4)
            quick += 1
        else:
            exact_only += 1
    assert quick and exact_only  # both paths were taken


def test_the_quick_comparison_leaves_nan_inf_and_shapes_to_the_exact_one() -> None:
    from aka_core.models import Tolerance

    tol = Tolerance(rtol=1e-2, atol=1e-2)
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    same = ref.clone()
    assert checking.quick_pass(same, ref, tol) is not None  # NaN for NaN, inf for inf: fine
    for bad in ([1.0, 0.0, float("inf"), -2.0], [1.0, float("nan"), float("-inf"), -2.0],
                [1.0, float("nan"), 3.0, -2.0], [float("inf"), float("nan"), float("inf"), -2.0]):
        out = torch.tensor(bad)
        assert checking.quick_pass(out, ref, tol) is None
        assert not checking.compare(out, ref, tol)["passed"]
    assert checking.quick_pass(same[:3], ref, tol) is None
    assert checking.compare(torch.empty(0), torch.empty(0), tol)["passed"]


# --------------------------------------------------------------------------- before the GPU lock


class _StubRunner:
    def __init__(self, side: str, reply: dict | Exception):
        self.side, self.reply = side, reply

    def read(self, timeout: float, what: str) -> dict:
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.mark.parametrize("reply", [
    {"event": "setup_failed", "message": "CUDA error: no CUDA-capable device is detected"},
    {"event": "loaded"},  # anything but "ready" before the side's code: not the side's word
])
def test_a_runner_not_ready_before_the_lock_is_the_hosts_fault(reply: dict) -> None:
    from aka_core.evaluation.failures import INFRA, FailureKind
    from aka_core.evaluation.judge import Judge

    judge = Judge.__new__(Judge)
    judge.runners = {"baseline": _StubRunner("baseline", {"event": "ready"}),
                     "candidate": _StubRunner("candidate", reply)}
    with pytest.raises(JudgeFailure) as caught:
        judge.await_ready()
    assert caught.value.kind == INFRA and caught.value.kind != FailureKind.CRASHED
    assert "candidate runner" in str(caught.value)


def test_a_runner_that_dies_before_it_is_ready_is_the_hosts_fault() -> None:
    from aka_core.evaluation.failures import INFRA, FailureKind
    from aka_core.evaluation.judge import Judge
    from aka_core.evaluation.sides import SideFailure

    judge = Judge.__new__(Judge)
    judge.runners = {"candidate": _StubRunner(
        "candidate", SideFailure(FailureKind.CRASHED, "the candidate runner exited (code 3)"))}
    judge._phase, judge.limit = "startup", 300.0
    with pytest.raises(JudgeFailure) as caught:
        judge.await_ready()
    assert caught.value.kind == INFRA and "retry" in str(caught.value)

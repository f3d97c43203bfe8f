"""Bad input a user can give aka: each gets exit status 2, a message naming the file and the
field or line, no traceback and no hang.

Configs go through ``aka validate CONFIG`` (the same loading ``aka run`` does), task folders
through ``aka validate TASK_DIR`` (static checks), command lines through the commands
themselves. Each case is a small change to a valid document, so that the error is about that
change alone.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aka_core.cli import main
from aka_core.testing.fixtures import task_yaml_data, write_task
from aka_core.yamlio import dump_yaml

SECONDS = 60


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def hang(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_aka(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    capsys.readouterr()
    with deadline(SECONDS):
        code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out + err


def assert_clear(code: int, text: str, *fragments: str) -> None:
    assert code == 2, f"exit {code}: {text[-1500:]}"
    assert "Traceback" not in text, text[-3000:]
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in: {text[-1500:]}"


# --------------------------------------------------------------------------- run configs

CONFIG = {
    "agent": {"template": "noop", "timeout_seconds": 600},
    "tasks": ["demo/scale_add"],
    "target_gpu_model": "cpu",
    "scorer": {"name": "speedup"},
    "executor": {"name": "local"},
}


def changed(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return apply


DELETE = object()

# (case id, change, fragment the message must hold besides the file name)
CONFIG_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown top key", changed(("agnet",), {}), "agnet"),
    ("no agent", changed(("agent",), DELETE), "agent"),
    ("agent not a mapping", changed(("agent",), "noop"), "agent"),
    ("unknown agent", changed(("agent", "template"), "gpt-kernel"), "gpt-kernel"),
    ("timeout negative", changed(("agent", "timeout_seconds"), -5), "agent.timeout_seconds"),
    ("timeout zero", changed(("agent", "timeout_seconds"), 0), "agent.timeout_seconds"),
    ("timeout text", changed(("agent", "timeout_seconds"), "ten minutes"),
     "agent.timeout_seconds"),
    ("timeout inf", changed(("agent", "timeout_seconds"), float("inf")), "agent.timeout_seconds"),
    ("timeout nan", changed(("agent", "timeout_seconds"), float("nan")), "agent.timeout_seconds"),
    ("timeout 1e41", changed(("agent", "timeout_seconds"), 1e41), "agent.timeout_seconds"),
    ("timeout bool", changed(("agent", "timeout_seconds"), True), "agent.timeout_seconds"),
    ("reserve larger than budget", changed(("agent", "evaluation_reserve_seconds"), 1e9),
     "evaluation_reserve_seconds"),
    ("unknown budget mode", changed(("agent", "budget_mode"), "tokens"), "budget_mode"),
    ("options not a mapping", changed(("agent", "options"), [1, 2]), "agent.options"),
    ("noop takes no options", changed(("agent", "options"), {"speed": 2}), "speed"),
    ("replay source missing", lambda doc: doc.update(agent={
        "template": "replay", "timeout_seconds": 600, "options": {"source": "/no/such/folder"}}),
     "agent.options: agent 'replay' rejects its options: source '/no/such/folder' is not a "
     "folder"),
    ("retry negative", changed(("agent", "retry"), {"infra_error": -1}), "infra_error"),
    ("retry factor below 1", changed(("agent", "retry"), {"backoff_factor": 0.5}),
     "backoff_factor"),
    ("tasks missing", changed(("tasks",), DELETE), "tasks"),
    ("tasks empty", changed(("tasks",), []), "tasks"),
    ("tasks not a list", changed(("tasks",), "demo/scale_add"), "tasks"),
    ("task id a number", changed(("tasks",), [42]), "tasks[0]"),
    ("unknown task", changed(("tasks",), ["demo/no_such_task"]), "demo/no_such_task"),
    ("unknown family glob", changed(("tasks",), ["nofamily/*"]), "nofamily"),
    ("unknown gpu model", changed(("target_gpu_model",), "H900"), "H900"),
    ("gpu model a number", changed(("target_gpu_model",), 100), "target_gpu_model"),
    ("unknown scorer", changed(("scorer",), {"name": "elo"}), "elo"),
    ("scorer options not a mapping", changed(("scorer",), {"name": "speedup", "options": 3}),
     "scorer.options"),
    ("scorer option unknown", changed(("scorer",), {"name": "speedup",
                                                    "options": {"treshold": 1.1}}), "treshold"),
    ("unknown executor", changed(("executor",), {"name": "kubernetes"}), "kubernetes"),
    ("device gpu", changed(("evaluation",), {"device": "gpu"}), "evaluation.device"),
    ("seeds zero", changed(("evaluation",), {"seeds_per_case": 0}), "seeds_per_case"),
    ("seeds 1000", changed(("evaluation",), {"seeds_per_case": 1000}), "seeds_per_case"),
    ("held_out yes", changed(("evaluation",), {"held_out": "yes"}), "evaluation.held_out"),
    ("held_out_seed negative", changed(("evaluation",), {"held_out_seed": -1}), "held_out_seed"),
    ("held_out_seed text", changed(("evaluation",), {"held_out_seed": "abc"}), "held_out_seed"),
    ("unknown confinement", changed(("evaluation",), {"confinement": "maybe"}), "confinement"),
    ("gpu id negative", changed(("resources",), {"gpus": [-1]}), "resources.gpus"),
    ("gpus and groups", changed(("resources",), {"gpus": [0], "gpu_groups": [[1]]}), "resources"),
    ("workers zero", changed(("resources",), {"gpus": [0], "workers_per_gpu": 0}),
     "workers_per_gpu"),
    ("unknown vendor", changed(("resources",), {"vendor": "intel"}), "vendor"),
    ("tasks folder missing", changed(("tasks_directory",), "no/such/folder"), "no/such/folder"),
    ("log folder a number", changed(("log_directory",), 7), "log_directory"),
]


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    write_task(tmp_path / "tasks")
    return tmp_path


@pytest.mark.parametrize(("change", "fragment"), [c[1:] for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_a_bad_config_is_answered_with_its_file_and_field(
    capsys: pytest.CaptureFixture[str], config_home: Path,
    change: Callable[[dict[str, Any]], None], fragment: str,
) -> None:
    doc: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in CONFIG.items()}
    doc["agent"] = dict(CONFIG["agent"])
    change(doc)
    path = config_home / "run.yaml"
    path.write_text(dump_yaml(doc), encoding="utf-8")
    code, text = run_aka(capsys, "validate", path)
    assert_clear(code, text, str(path), fragment)


RAW_CONFIGS: list[tuple[str, bytes, str]] = [
    ("empty file", b"", "expected a mapping"),
    ("only a comment", b"# nothing here\n", "expected a mapping"),
    ("a list", b"- a\n- b\n", "expected a mapping"),
    ("a scalar", b"42\n", "expected a mapping"),
    ("tab indentation", b"agent:\n\ttemplate: noop\n", "invalid YAML"),
    ("unclosed bracket", b"agent: {template: noop\ntasks: [a]\n", "invalid YAML"),
    ("duplicate key", b"agent: {template: noop}\nagent: {template: noop}\ntasks: [a]\n"
                      b"target_gpu_model: cpu\n", "agent"),
    ("not UTF-8", b"agent: {template: noop}\n# caf\xe9\n", "not UTF-8"),
    ("binary garbage", bytes(range(256)) * 4, "run.yaml"),
    ("alias bomb", b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"b{i}: &b{i} [{', '.join([f'*b{i - 1}' if i else '*a'] * 10)}]\n".encode()
        for i in range(10)), "aliases"),
    ("deep nesting", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "run.yaml"),
]


@pytest.mark.parametrize(("raw", "fragment"), [c[1:] for c in RAW_CONFIGS],
                         ids=[c[0] for c in RAW_CONFIGS])
def test_a_broken_config_file_is_answered_with_its_name(
    capsys: pytest.CaptureFixture[str], config_home: Path, raw: bytes, fragment: str,
) -> None:
    path = config_home / "run.yaml"
    path.write_bytes(raw)
    code, text = run_aka(capsys, "validate", path)
    assert_clear(code, text, str(path), fragment)


# --------------------------------------------------------------------------- task folders

TASK_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("no entrypoint", {"entrypoint": DELETE}, "entrypoint"),
    ("entrypoint without function", {"entrypoint": "kernel.py"}, "entrypoint"),
    ("entrypoint file missing", {"entrypoint": "kernal.py:scale_add"}, "kernal.py"),
    ("entrypoint function missing", {"entrypoint": "kernel.py:scale_ad"}, "scale_ad"),
    ("reference file missing", {"reference": "ref.py:scale_add_reference"}, "ref.py"),
    ("reference function missing", {"reference": "reference.py:nothing"}, "nothing"),
    ("inputs missing", {"inputs": DELETE}, "inputs"),
    ("inputs function missing", {"inputs": "inputs.py:make"}, "make"),
    ("unknown backend", {"backend": "opencl"}, "opencl"),
    ("unknown format", {"format": "model"}, "format"),
    ("no cases", {"cases": []}, "cases"),
    ("case without name", {"cases": [{"params": {"M": 1, "N": 1}}]}, "cases[0]"),
    ("case params a list", {"cases": [{"name": "a", "params": [1, 2]}]}, "cases[0].params"),
    ("duplicate case names", {"cases": [{"name": "a", "params": {"M": 1, "N": 1}},
                                        {"name": "a", "params": {"M": 2, "N": 2}}]}, "a"),
    ("tolerance negative", {"tolerance": {"float32": {"rtol": -1, "atol": 0}}}, "rtol"),
    ("tolerance inf", {"tolerance": {"float32": {"rtol": float("inf"), "atol": 0}}}, "rtol"),
    ("tolerance unknown dtype", {"tolerance": {"float33": {"rtol": 1e-3, "atol": 0}}},
     "float33"),
    ("tolerance missing", {"tolerance": DELETE}, "tolerance"),
    ("editable empty", {"editable": []}, "editable"),
    ("editable escapes", {"editable": ["../outside.py"]}, "editable"),
    ("editable absolute", {"editable": ["/etc/passwd"]}, "editable"),
    ("editable missing file", {"editable": ["kernel2.py"]}, "kernel2.py"),
    ("timeouts inf", {"timeouts": {"compile_seconds": float("inf")}}, "compile_seconds"),
    ("timeouts zero", {"timeouts": {"compile_seconds": 0}}, "compile_seconds"),
    ("timeouts a week", {"timeouts": {"timing_seconds": 604800}}, "timing_seconds"),
    ("unknown timeouts key", {"timeouts": {"run_seconds": 5}}, "run_seconds"),
    ("seeds per case zero", {"seeds_per_case": 0}, "seeds_per_case"),
    ("draws reversed range", {"held_out_draws": {"count": 2, "params": {
        "M": {"range": [100, 10]}, "N": 8}}}, "held_out_draws"),
    ("draws count zero", {"held_out_draws": {"count": 0, "params": {"M": 1}}}, "count"),
    ("draws unknown spec", {"held_out_draws": {"count": 1, "params": {"M": {"between": [1, 2]}}}},
     "held_out_draws"),
    ("cost not an expression", {"cost": {"bytes": "M *", "flops": "M"}}, "cost"),
    ("cost calls a function", {"cost": {"bytes": "__import__('os').getpid()"}}, "cost"),
    ("cost unknown parameter", {"cost": {"bytes": "4 * Q"}}, "Q"),
    ("unknown torch rule", {"rules": {"torch_compute": "sometimes"}}, "torch_compute"),
    ("unknown precision rule", {"rules": {"compute_precision": "float8"}}, "compute_precision"),
    ("unknown top key", {"instructons": "x"}, "instructons"),
    ("smoke case not a case", {"smoke_case": "tiny"}, "smoke_case"),
    ("requires unknown vendor", {"requires": {"vendors": ["intel"]}}, "vendors"),
]


@pytest.mark.parametrize(("overrides", "fragment"), [c[1:] for c in TASK_CASES],
                         ids=[c[0] for c in TASK_CASES])
def test_a_bad_task_folder_is_answered_with_its_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, overrides: dict[str, Any], fragment: str,
) -> None:
    data = task_yaml_data()
    for key, value in overrides.items():
        if value is DELETE:
            data.pop(key, None)
        else:
            data[key] = value
    task_dir = write_task(tmp_path / "tasks")
    (task_dir / "task.yaml").write_text(dump_yaml(data), encoding="utf-8")
    code, text = run_aka(capsys, "validate", task_dir)
    assert_clear(code, text, fragment)
    assert "task.yaml" in text or str(task_dir) in text


# --------------------------------------------------------------------------- command lines


def command_cases(tmp: Path) -> list[tuple[str, list[str | Path], str]]:
    task = tmp / "tasks" / "demo" / "scale_add"
    return [
        ("eval without candidate", ["eval", task], "--candidate"),
        ("eval unknown device", ["eval", task, "--candidate", task, "--device", "tpu"], "tpu"),
        ("eval candidate a file", ["eval", task, "--candidate", task / "kernel.py"], "is a file"),
        ("eval candidate missing", ["eval", task, "--candidate", tmp / "nope"], "does not exist"),
        ("eval task missing", ["eval", tmp / "nope", "--candidate", task], "no task folder"),
        ("eval held-out seed text", ["eval", task, "--candidate", task, "--held-out-seed", "x"],
         "--held-out-seed"),
        ("run config missing", ["run", tmp / "none.yaml"], "none.yaml"),
        ("run with config and resume", ["run", tmp / "none.yaml", "--resume", tmp],
         "not both"),
        ("run nothing", ["run"], "give a run config"),
        ("validate missing path", ["validate", tmp / "nope"], "no such file or folder"),
        ("validate folder without tasks", ["validate", tmp / "empty"], "no task.yaml"),
        ("unknown command", ["evaluate"], "evaluate"),
        ("tasks unknown target", ["tasks", "--tasks-dir", tmp / "tasks", "--target", "H900"],
         "H900"),
        ("tasks folder missing", ["tasks", "--tasks-dir", tmp / "nope"], "no tasks folder"),
        ("report of a non-run", ["report", tmp / "empty"], "empty"),
        ("compare one run", ["compare", tmp / "empty"], "compare"),
    ]


COMMAND_IDS = [c[0] for c in command_cases(Path("/x"))]


@pytest.mark.parametrize("index", range(len(COMMAND_IDS)), ids=COMMAND_IDS)
def test_a_bad_command_line_is_answered(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, index: int,
) -> None:
    write_task(tmp_path / "tasks")
    (tmp_path / "empty").mkdir()
    _, args, fragment = command_cases(tmp_path)[index]
    try:
        code, text = run_aka(capsys, *args)
    except SystemExit as exc:  # argparse's own usage errors
        code, text = int(exc.code or 0), "".join(capsys.readouterr())
    assert_clear(code, text, fragment)


def test_every_option_of_every_command_says_what_it_does() -> None:
    import argparse

    from aka_core.cli import build_parser

    missing = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
            elif action.help is None and not isinstance(action, argparse._HelpAction):
                missing.append(f"{where} {action.dest}")

    walk(build_parser(), "aka")
    assert not missing


def test_an_interrupted_run_names_the_folder_to_resume(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    from aka_core import cli
    from aka_core.run import execute

    (tmp_path / "run").mkdir()

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(execute, "read_run_file", lambda run_dir: {"config": {}, "task_ids": []})
    monkeypatch.setattr(execute, "execute_run", interrupted)
    monkeypatch.setattr(cli, "_CURRENT_RUN", [None])
    code, text = run_aka(capsys, "run", "--resume", tmp_path / "run")
    assert code == 130
    assert f"resume with `aka run --resume {(tmp_path / 'run').resolve()}`" in text


@pytest.mark.slow  # 10-17 s: the fast tier stays under 3 minutes
def test_aka_run_keeps_one_format_per_stream_when_logging_json(tmp_path: Path) -> None:
    """Not on a terminal, stderr carries JSON log lines only (the summary is one of them) and
    stdout the run directory only."""
    import json
    import subprocess
    import sys

    write_task(tmp_path / "tasks")
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml({**CONFIG, "tasks": ["demo"],
                                 "evaluation": {"seeds_per_case": 1}}), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "aka_core.cli", "run", str(config),
                           "--output-root", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines() == [proc.stdout.strip()]
    assert Path(proc.stdout.strip()).is_dir()
    events = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    summary = [e for e in events if e["event"] == "run summary"]
    assert summary and summary[0]["tasks"][0]["task_id"] == "demo/scale_add"


def test_a_bad_disk_limit_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # Read by every judge: a bad value would otherwise be an evaluator fault in every evaluation.
    monkeypatch.setenv("AKA_SCRATCH_LIMIT", "lots")
    task = write_task(tmp_path / "tasks")
    code, text = run_aka(capsys, "eval", task, "--candidate", task)
    assert_clear(code, text, "AKA_SCRATCH_LIMIT='lots': give bytes, or a number with K, M, G or T")


def test_a_bad_memory_limit_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKA_MEMORY_LIMIT", "0")
    task = write_task(tmp_path / "tasks")
    code, text = run_aka(capsys, "eval", task, "--candidate", task)
    assert_clear(code, text, "AKA_MEMORY_LIMIT='0': the limit must be positive")


def test_eval_on_a_gpu_this_host_lacks_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    from aka_core.devices import probe

    if probe().get("gpu"):
        pytest.skip("this host has a GPU")
    task = write_task(tmp_path / "tasks")
    code, text = run_aka(capsys, "eval", task, "--candidate", task, "--device", "cuda")
    assert_clear(code, text, "this host has none PyTorch can see")


@pytest.mark.slow  # 15 s: a whole evaluation in a subprocess
def test_a_native_task_on_a_host_without_its_compiler_is_not_judged(tmp_path: Path) -> None:
    # A torch2hip task: the baseline is PyTorch, only the candidate needs clang. Without one the
    # candidate must not be blamed (the judge asks the backend whether this host can build).
    import os
    import subprocess
    import sys

    pytest.importorskip("aka_backend_hip")
    repo = Path(__file__).resolve().parents[2]
    tools = tmp_path / "bin"  # a PATH with this Python and no compiler at all
    tools.mkdir()
    for name in ("sh", "env", "uname", "nproc"):
        found = Path("/usr/bin", name)
        if found.exists():
            (tools / name).symlink_to(found)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{tools}"}
    env.pop("AKA_HIP_CLANG", None)
    done = subprocess.run(
        [sys.executable, "-m", "aka_core.cli", "eval", str(repo / "tasks/torch2hip/silu_and_mul"),
         "--candidate", str(repo / "tests/solutions/torch2hip/silu_and_mul"), "--no-timing"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "this host cannot build hip code" in done.stdout
    assert "the candidate was not judged" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr

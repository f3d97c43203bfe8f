"""The slurm executor without a cluster: options, batch scripts, Slurm output parsing, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from aka_executor_slurm import aka_register_executors, make_executor
from aka_executor_slurm.batch import array_script, task_script, task_slug
from aka_executor_slurm.commands import _parse_states
from aka_executor_slurm.executor import SlurmExecutor
from aka_executor_slurm.options import SlurmOptions

from aka_core.plugin import AkaError, dump_yaml
from aka_core.testing import ExecutorContract, executor_run, write_task
from aka_core.testing import cli_main as main

RUN = Path("/shared/runs/run_1")
TASKS = Path("/shared/aka/tasks")
LOGS = RUN / ".slurm" / "logs"


class TestSlurmContract(ExecutorContract):
    record = aka_register_executors()[0]
    options = {"partition": "gpu", "time": "01:30:00", "gpus_per_task": 1, "array": True,
               "container_image": "nvcr.io#nvidia/pytorch:25.01-py3", "poll_seconds": 5}

    def test_runs_every_task_exactly_once(self) -> None:
        pytest.skip("jobs run `aka run-task` on the cluster, not the run_task callback: "
                    "tests/test_cluster.py runs tasks through a real Slurm cluster")

    def test_no_tasks_runs_nothing(self, executor: SlurmExecutor, tmp_path: Path) -> None:
        calls: list[str] = []
        # no Slurm needed: nothing to do
        executor.execute(executor_run(tmp_path / "run", [], calls.append))
        assert calls == []
        assert not (tmp_path / "run").exists()


def test_registered_through_the_host(register_plugin) -> None:
    import aka_executor_slurm

    record = register_plugin(aka_executor_slurm).executor("slurm")
    assert record.factory is make_executor and record.options_class is SlurmOptions


def test_options_reach_the_executor_typed() -> None:
    made = TestSlurmContract.record.make({"gpus_per_task": 1, "poll_seconds": 5,
                                          "container_mounts": ["/a:/a"],
                                          "environment": {"A": "1"}})
    assert made.options == SlurmOptions(gpus_per_task=1, poll_seconds=5.0,
                                        container_mounts=("/a:/a",), environment={"A": "1"})
    assert TestSlurmContract.record.make({"gpus_per_task": "h200:2"}).options.gres_list() \
        == "gpu:h200:2"
    assert TestSlurmContract.record.make(None).options == SlurmOptions()


def write_config(tmp_path: Path, executor_options: str) -> Path:
    write_task(tmp_path / "tasks", "demo/a")
    path = tmp_path / "run.yaml"
    path.write_text(
        "agent: {template: noop}\n"
        "tasks: [demo]\n"
        "target_gpu_model: cpu\n"
        "executor:\n"
        "  name: slurm\n"
        "  options:\n" + executor_options, encoding="utf-8")
    return path


@pytest.mark.parametrize(("options", "expected"), [
    ("    partion: debug\n", "7: executor.options.partion: unknown key (did you mean "
                             "'partition'?)"),
    ("    partition: debug\n    time: 90 minutes\n",
     "8: executor.options.time: '90 minutes' does not match the pattern"),
    ("    gpus_per_task: -1\n", "7: executor.options.gpus_per_task:"),
    ("    environment: {1BAD: x}\n", "7: executor.options.environment.1BAD: key not allowed"),
])
def test_bad_options_fail_with_file_and_line(tmp_path: Path, capsys, options: str,
                                             expected: str) -> None:
    config = write_config(tmp_path, options)
    code = main(["run", str(config), "--output-root", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{config}:{expected}" in err
    assert not (tmp_path / "out").exists(), "nothing is created for an invalid config"


def test_sbatch_missing_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AkaError, match="not on PATH: sbatch, squeue, scancel"):
        TestSlurmContract.record.make({}).execute(
            executor_run(tmp_path, ["demo/a"], lambda task_id: None))


# --------------------------------------------------------------------------- batch scripts


def bash_syntax_ok(script: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    path.write_text(script, encoding="utf-8")
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_task_script_has_every_option_as_sbatch_lines(tmp_path: Path) -> None:
    options = SlurmOptions(partition="gpu", account="kernels", qos="high", time="2-00:00:00",
                           gpus_per_task="h200:2", gres="nvme:1", cpus_per_task=8, mem="64G",
                           extra_sbatch_args=["--constraint=h200"], python="/opt/venv/bin/python",
                           setup_commands=["module load cuda"], environment={"HF_HOME": "/a b"})
    script = task_script(options, run_dir=RUN, tasks_root=TASKS, task_id="triton2triton/gelu",
                         log_dir=LOGS)
    directives = [line.removeprefix("#SBATCH ") for line in script.splitlines()
                  if line.startswith("#SBATCH ")]
    assert directives == [
        "--job-name=aka-triton2triton.gelu",
        f"--output={LOGS}/triton2triton.gelu-%j.out",
        "--open-mode=append", f"--chdir={RUN}", "--nodes=1", "--ntasks=1",
        "--partition=gpu", "--account=kernels", "--qos=high", "--time=2-00:00:00",
        "--gres=gpu:h200:2,nvme:1", "--cpus-per-task=8", "--mem=64G", "--constraint=h200",
    ]
    assert "export HF_HOME='/a b'\nmodule load cuda\n" in script
    assert (f'/opt/venv/bin/python -m aka_core.cli run-task {RUN} "$TASK_ID"') in script
    assert f'cp -- "{LOGS}/triton2triton.gelu-${{SLURM_JOB_ID}}.out"' in script
    bash_syntax_ok(script, tmp_path)


def test_defaults_request_nothing_and_use_this_interpreter(tmp_path: Path) -> None:
    script = task_script(SlurmOptions(), run_dir=RUN, tasks_root=TASKS, task_id="demo/a",
                         log_dir=LOGS)
    assert "--gres" not in script and "--partition" not in script and "--time" not in script
    assert f"{sys.executable} -m aka_core.cli run-task" in script
    bash_syntax_ok(script, tmp_path)


def test_container_runs_through_srun_with_the_run_and_tasks_mounted(tmp_path: Path) -> None:
    options = SlurmOptions(container_image="nvcr.io#nvidia/pytorch:25.01-py3",
                           container_mounts=["/data:/data:ro"],
                           container_options=["--container-remap-root"])
    script = task_script(options, run_dir=RUN, tasks_root=TASKS, task_id="demo/a", log_dir=LOGS)
    assert (f"srun --ntasks=1 '--container-image=nvcr.io#nvidia/pytorch:25.01-py3' "
            f"--container-mounts={RUN}:{RUN},{TASKS}:{TASKS},/data:/data:ro "
            f"--container-workdir={RUN} --container-remap-root python3 -m aka_core.cli "
            f'run-task {RUN} "$TASK_ID"') in script
    bash_syntax_ok(script, tmp_path)


def test_array_script_maps_elements_to_tasks(tmp_path: Path) -> None:
    tasks = ["demo/a", "demo/b c", "other/d"]
    script = array_script(SlurmOptions(max_concurrent=2), run_dir=RUN, tasks_root=TASKS,
                          task_ids=tasks, log_dir=LOGS)
    assert "#SBATCH --array=0-2%2" in script
    assert f"#SBATCH --output={LOGS}/array-%A_%a.out" in script
    bash_syntax_ok(script, tmp_path)
    # The element -> task mapping, evaluated by bash itself.
    body = script.split("TASK_ID=")[0] + 'TASK_ID="${TASKS[$SLURM_ARRAY_TASK_ID]}"\necho "$TASK_ID"'
    for index, task_id in enumerate(tasks):
        out = subprocess.run(["bash", "-c", body], capture_output=True, text=True, check=True,
                             env={"SLURM_ARRAY_TASK_ID": str(index)})
        assert out.stdout.strip() == task_id


def test_task_slug() -> None:
    assert task_slug("triton2triton/vllm/rms_norm") == "triton2triton.vllm.rms_norm"
    assert task_slug("odd name/x") == "odd_name.x"


def test_parse_states_from_squeue_and_sacct() -> None:
    text = "12|RUNNING\n13_0|COMPLETED\n13_1|CANCELLED by 0\n14|PENDING\n\n"
    assert _parse_states(text) == {"12": "RUNNING", "13_0": "COMPLETED", "13_1": "CANCELLED",
                                   "14": "PENDING"}


def test_option_defaults_match_the_schema() -> None:
    schema = aka_register_executors()[0].config_schema
    assert schema is not None
    defaults = SlurmOptions()
    for name, prop in schema["properties"].items():
        if "default" in prop:
            value = getattr(defaults, name)
            assert (list(value) if isinstance(value, tuple) else value) == prop["default"], name
    assert set(schema["properties"]) == {a.name for a in SlurmOptions.__attrs_attrs__}


def test_a_config_with_every_option_validates(tmp_path: Path) -> None:
    options = {"partition": "gpu", "account": "a", "qos": "q", "time": "00:30:00",
               "gpus_per_task": 1, "gres": "nvme:1", "cpus_per_task": 4, "mem": "16G",
               "array": True, "max_concurrent": 4, "job_name": "aka", "container_image": "img",
               "container_mounts": ["/a:/a"], "container_options": ["--container-remap-root"],
               "extra_sbatch_args": ["--constraint=x"], "python": "python3",
               "setup_commands": ["true"], "environment": {"A": "1"}, "poll_seconds": 2,
               "cancel_on_interrupt": False}
    config = write_config(tmp_path, "".join(f"    {line}\n" for line in
                                            dump_yaml(options).splitlines()))
    assert main(["validate", str(config)]) == 0

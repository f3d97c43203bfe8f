"""The JSON Schemas and the problems they produce: what a user reads when a file is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from aka_core.convert import unstructure
from aka_core.errors import ConfigError
from aka_core.models import (
    Acceptance,
    AgentExecution,
    AgentUsage,
    Gate,
    IntegrityReport,
    TaskResult,
)
from aka_core.schema_validation import (
    field_path,
    load_schema,
    schemas_directory,
    validate_document,
    validate_or_raise,
)
from aka_core.yamlio import to_builtin

CONFIG = Path("configs/x.yaml")


def problems_of(text: str, schema: str = "run_config") -> list[str]:
    source = YAML(typ="rt").load(text)
    problems = validate_document(to_builtin(source), load_schema(schema), file=CONFIG,
                                 source=source)
    return [p.render() for p in problems]


@pytest.mark.parametrize("name", ["run_config", "task", "task_result"])
def test_every_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schemas_are_found_in_the_repository_checkout() -> None:
    assert (schemas_directory() / "run_config.schema.json").is_file()
    assert load_schema("run_config.schema.json") is load_schema("run_config.schema.json")


def test_every_object_in_the_run_config_schema_forbids_unknown_keys() -> None:
    def objects(node: object, path: str) -> list[str]:
        found: list[str] = []
        if isinstance(node, dict):
            if node.get("type") == "object" and not path.endswith("options"):
                found += [] if node.get("additionalProperties") is False else [path]
            for key, value in node.items():
                found += objects(value, f"{path}.{key}")
        return found

    assert objects(load_schema("run_config"), "$") == []


def test_misspelled_key_names_file_line_field_and_suggestion() -> None:
    text = "agent:\n  template: noop\n  timout_seconds: 30\ntasks: [a]\ntarget_gpu_model: H100\n"
    assert problems_of(text) == [
        "configs/x.yaml:3: agent.timout_seconds: unknown key (did you mean 'timeout_seconds'?)"
    ]


def test_unknown_key_without_close_match_lists_valid_keys() -> None:
    text = "agent: {template: noop, zzz: 1}\ntasks: [a]\ntarget_gpu_model: H100\n"
    (message,) = problems_of(text)
    assert "agent.zzz: unknown key" in message
    assert "template, budget_mode, timeout_seconds, evaluation_reserve_seconds, options" in message


def test_wrong_type_says_what_was_expected_and_what_was_given() -> None:
    text = "agent:\n  template: noop\n  timeout_seconds: soon\ntasks: [a]\ntarget_gpu_model: H100\n"
    assert problems_of(text) == [
        "configs/x.yaml:3: agent.timeout_seconds: expected a number, got a string ('soon')"
    ]


def test_enum_error_lists_allowed_values() -> None:
    text = ("agent: {template: noop}\ntasks: [a]\ntarget_gpu_model: H100\n"
            "evaluation:\n  device: gpu\n")
    assert problems_of(text) == [
        "configs/x.yaml:5: evaluation.device: 'gpu' is not allowed "
        "(choose one of: 'auto', 'cuda', 'cpu')"
    ]


def test_missing_required_keys_are_named() -> None:
    rendered = problems_of("agent: {}\ntasks: [a]\n")
    assert "configs/x.yaml:1: missing required key 'target_gpu_model'" in rendered
    assert "configs/x.yaml:1: agent: missing required key 'template'" in rendered


def test_bounds_and_empty_lists() -> None:
    text = ("agent: {template: noop, timeout_seconds: 0}\ntasks: []\ntarget_gpu_model: H100\n"
            "evaluation: {seeds_per_case: 17}\n")
    rendered = problems_of(text)
    assert "configs/x.yaml:1: agent.timeout_seconds: must be greater than 0, got 0" in rendered
    assert "configs/x.yaml:2: tasks: needs at least 1 item(s)" in rendered
    assert "configs/x.yaml:4: evaluation.seeds_per_case: must be at most 16, got 17" in rendered


def test_list_items_render_with_an_index_and_their_own_line() -> None:
    text = ("format: operator\nfamily: f\nbackend: triton\neditable: [kernel.py]\n"
            "entrypoint: kernel.py:f\nreference: reference.py:f\ninputs: inputs.py:f\n"
            "cases:\n  - {name: a, params: {}}\n  - {name: b}\n"
            "tolerance: {float32: {rtol: 0.1}}\ninstructions: go\n")
    assert problems_of(text, "task") == [
        "configs/x.yaml:10: cases[1]: missing required key 'params'"
    ]


def test_callable_pattern_error_explains_the_expected_form() -> None:
    text = ("format: operator\nfamily: f\nbackend: triton\neditable: [kernel.py]\n"
            "entrypoint: kernel.py\nreference: reference.py:f\ninputs: inputs.py:f\n"
            "cases: [{name: a, params: {}}]\ntolerance: {float32: {rtol: 0.1}}\n"
            "instructions: go\n")
    (message,) = problems_of(text, "task")
    assert message.startswith("configs/x.yaml:5: entrypoint: 'kernel.py' does not match")
    assert message.endswith("(expected `file.py:function`)")


def test_unknown_tolerance_dtype_points_at_the_key() -> None:
    text = ("format: operator\nfamily: f\nbackend: triton\neditable: [kernel.py]\n"
            "entrypoint: kernel.py:f\nreference: reference.py:f\ninputs: inputs.py:f\n"
            "cases: [{name: a, params: {}}]\ntolerance:\n  float31: {rtol: 0.1}\n"
            "instructions: go\n")
    (message,) = problems_of(text, "task")
    assert message.startswith("configs/x.yaml:10: tolerance.float31: key not allowed here")
    assert "did you mean 'float32'?" in message


def test_validate_or_raise_reports_every_problem_sorted_by_line() -> None:
    source = YAML(typ="rt").load(
        "tasks: [a]\nagent:\n  template: noop\n  budget_mode: tokens\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        validate_or_raise(to_builtin(source), load_schema("run_config"), file=CONFIG,
                          source=source)
    lines = [p.line for p in info.value.problems]
    assert lines == sorted(lines)
    assert len(info.value.problems) == 3  # budget_mode, bogus, missing target_gpu_model
    assert "configs/x.yaml:4: agent.budget_mode" in str(info.value)


def test_field_path_rendering() -> None:
    assert field_path(["agent", "timeout_seconds"]) == "agent.timeout_seconds"
    assert field_path(["cases", 2, "params"]) == "cases[2].params"
    assert field_path([]) == ""


def _full_result() -> TaskResult:
    return TaskResult(
        task_id="triton2triton/gelu", status="completed", family="triton2triton",
        backend="triton", started_at="2025-01-01T00:00:00Z", duration_seconds=12.5,
        agent_execution=AgentExecution(agent="noop", status="completed", exit_code=0,
                                       usage=AgentUsage(input_tokens=10, cost_usd=None)),
        integrity=IntegrityReport(ok=True, changed_files=("kernel.py",)),
        pass_compilation=True, pass_correctness=True, candidate_accepted=True,
        acceptance=Acceptance(accepted=True, reason="all gates passed",
                              gates=(Gate(name="correctness", passed=True),)),
        speedup_ratio=1.4, score=0.25, scorer={"name": "speedup"},
        evaluation={"device": {"kind": "cuda"}, "performance": {"cases": []}, "extra": 1},
    )


@pytest.mark.parametrize("result", [
    _full_result(),
    TaskResult(task_id="a/b", status="skipped", skip_reason="needs an AMD GPU"),
])
def test_task_results_as_aka_writes_them_are_valid(result: TaskResult) -> None:
    data = unstructure(result)
    assert validate_document(data, load_schema("task_result"), file=None) == []
    # and after a round trip through text, where tuples have become lists
    assert validate_document(json.loads(json.dumps(data)), load_schema("task_result"),
                             file=None) == []


def test_task_result_schema_rejects_a_drifted_record() -> None:
    data = json.loads(json.dumps(unstructure(_full_result())))
    data["candidate_acepted"] = True
    data["status"] = "done"
    messages = [p.render() for p in validate_document(data, load_schema("task_result"),
                                                      file=None)]
    assert any("candidate_acepted: unknown key (did you mean 'candidate_accepted'?)" in m
               for m in messages)
    assert any(m.startswith("status: 'done' is not allowed") for m in messages)


def test_task_result_schema_covers_every_model_field() -> None:
    import attrs

    properties = set(load_schema("task_result")["properties"])
    assert properties == {f.name for f in attrs.fields(TaskResult)}


def test_every_agent_status_and_the_retry_fields_are_in_the_schemas() -> None:
    from typing import get_args

    import attrs

    from aka_core.models import AgentRetry, AgentStatus

    schema = load_schema("task_result")
    execution = schema["$defs"]["agent_execution"]["properties"]
    assert execution["status"]["enum"] == list(get_args(AgentStatus))
    result = unstructure(TaskResult(
        task_id="a/b", status="infra_error", error="the agent was rate-limited",
        agent_execution=AgentExecution(agent="codex", status="rate_limited", attempts=3)))
    assert validate_document(result, schema, file=None) == []
    retry = load_schema("run_config")["properties"]["agent"]["properties"]["retry"]
    assert set(retry["properties"]) == {f.name for f in attrs.fields(AgentRetry)}
    assert {k: v["default"] for k, v in retry["properties"].items()} == attrs.asdict(AgentRetry())


def test_the_timing_policys_between_runs_term_is_bounded_and_structured() -> None:
    from aka_core.convert import structure
    from aka_core.models import TimingPolicy

    head = ("format: operator\nfamily: f\nbackend: triton\neditable: [kernel.py]\n"
            "entrypoint: kernel.py:f\nreference: reference.py:f\ninputs: inputs.py:f\n"
            "cases: [{name: a, params: {}}]\ntolerance: {float32: {rtol: 0.1}}\n"
            "instructions: go\n")
    assert problems_of(head + "timing: {between_runs_percent: 0.5, placements: 3}\n",
                       "task") == []
    (message,) = problems_of(head + "timing: {between_runs_percent: -1}\n", "task")
    assert message == ("configs/x.yaml:11: timing.between_runs_percent: must be at least 0, "
                       "got -1")
    assert structure({"between_runs_percent": 0.5}, TimingPolicy).between_runs_percent == 0.5
    assert TimingPolicy().between_runs_percent == 0.3

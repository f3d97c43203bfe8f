"""The data of aka: run configs, tasks, evaluations and task results.

Frozen attrs models; defaults live here. ``aka_core.convert.converter`` structures validated YAML
into them and unstructures them for writing. JSON Schemas in ``schemas/`` validate user input
before it reaches these models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import attrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from aka_core.convert import converter
from aka_core.evaluation.record import EvaluationRecord, as_record
from aka_core.gpus import GpuModel, target_model

# --------------------------------------------------------------------------- run config


@attrs.frozen(kw_only=True)
class AgentRetry:
    """How often the lifecycle runs a task's agent again when its provider, not the agent, failed:
    ``rate_limited`` more times after a rate-limited attempt, ``infra_error`` more times after an
    infrastructure failure (provider outage, network). Attempt ``n`` waits ``backoff_seconds *
    backoff_factor ** (n - 1)`` before it starts. When retries run out, the task ends with status
    ``infra_error`` (not judged, not the candidate's fault)."""

    rate_limited: int = 2
    infra_error: int = 0
    backoff_seconds: float = 60.0
    backoff_factor: float = 2.0

    def retries(self, status: str) -> int:
        """How many retries an attempt that ended with agent status ``status`` gets."""
        return {"rate_limited": self.rate_limited, "infra_error": self.infra_error}.get(status, 0)

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...)."""
        return self.backoff_seconds * self.backoff_factor ** (retry - 1)


@attrs.frozen(kw_only=True)
class AgentConfig:
    name: str
    """The registered agent's name. A run config spells it ``agent.template``, the original AKA
    config's key (the converter maps the two)."""
    budget_mode: Literal["time"] = "time"
    timeout_seconds: float = 3600.0
    evaluation_reserve_seconds: float = 120.0
    """Part of ``timeout_seconds`` kept for the final evaluation (at most half of it)."""
    options: dict[str, Any] = attrs.Factory(dict)
    retry: AgentRetry = attrs.Factory(AgentRetry)

    @property
    def agent_seconds(self) -> float:
        """The agent's own time: the task budget less the reserve for the final evaluation."""
        return self.timeout_seconds - min(self.evaluation_reserve_seconds, self.timeout_seconds / 2)


converter.register_structure_hook(AgentConfig, make_dict_structure_fn(
    AgentConfig, converter, _cattrs_forbid_extra_keys=True, name=override(rename="template")))
converter.register_unstructure_hook(AgentConfig, make_dict_unstructure_fn(
    AgentConfig, converter, name=override(rename="template")))


@attrs.frozen(kw_only=True)
class NamedPluginConfig:
    name: str
    options: dict[str, Any] = attrs.Factory(dict)


Confinement = Literal["required", "best_effort", "off"]


@attrs.frozen(kw_only=True)
class EvaluationConfig:
    device: Literal["auto", "cuda", "cpu"] = "auto"
    seeds_per_case: int | None = None
    held_out: bool = True
    held_out_seed: int | None = None
    """Draw the held-out shapes from this seed, the same for every candidate (comparisons under
    identical conditions; a per-case speedup can differ by several x between shapes). None: a
    fresh secret draw per evaluation. A fixed seed is only as secret as this file: keep it where
    agents cannot read it."""
    measure_performance: bool = True
    confinement: Confinement = "required"
    """How the runners that execute candidate and baseline code are confined (aka_core.evaluation.sandbox):
    ``required`` fails the evaluation as an infra_error where this host cannot confine them,
    ``best_effort`` confines what it can and says so in the record, ``off`` does not confine."""


@attrs.frozen(kw_only=True)
class ResourcesConfig:
    """The GPUs a run may use on this host; without any, tasks run one after another, as before.

    ``gpus`` and ``gpu_groups`` are mutually exclusive: each id (or group) is a slot that gets
    ``workers_per_gpu`` worker processes, each seeing only the slot's devices. Ids count the GPUs
    this host shows aka (after any ``CUDA_VISIBLE_DEVICES`` it was started with).
    """

    gpus: tuple[int, ...] | None = None
    gpu_groups: tuple[tuple[int, ...], ...] | None = None
    workers_per_gpu: int = 1
    """Workers sharing each GPU (or group): agents overlap; the GPU lock keeps checks and timing
    exclusive."""
    vendor: Literal["auto", "nvidia", "amd"] = "auto"
    """Which visibility variables restrict a worker; auto: the vendor of this host's GPU."""


@attrs.frozen(kw_only=True)
class RunConfig:
    agent: AgentConfig
    tasks: tuple[str, ...]
    target_gpu_model: GpuModel | None = attrs.field(converter=target_model)
    """Parsed once, where the config is read or built (a name such as ``H100``, or an
    architecture, is accepted in code too). None, only in code: the GPU this host has
    (``aka eval``)."""
    log_directory: str = "logs"
    workspace_directory_prefix: str = "workspace"
    tasks_directory: str | None = None
    scorer: NamedPluginConfig = attrs.Factory(lambda: NamedPluginConfig(name="speedup"))
    executor: NamedPluginConfig = attrs.Factory(lambda: NamedPluginConfig(name="local"))
    evaluation: EvaluationConfig = attrs.Factory(EvaluationConfig)
    resources: ResourcesConfig = attrs.Factory(ResourcesConfig)
    source: str | None = None
    """The file the config was read from (not part of the schema)."""

    @property
    def target_name(self) -> str:
        """The target as the config spells it, for names and messages (``this host's GPU`` when
        none is named)."""
        return "this host's GPU" if self.target_gpu_model is None else self.target_gpu_model.name


# --------------------------------------------------------------------------- tasks


@attrs.frozen(kw_only=True)
class Case:
    name: str
    params: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class Tolerance:
    rtol: float
    atol: float = 0.0
    max_rel_l2: float | None = None


@attrs.frozen(kw_only=True)
class Requirements:
    vendors: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    min_compute_capability: float | None = None
    cpu_interpreter: bool = True


@attrs.frozen(kw_only=True)
class Timeouts:
    compile_seconds: float = 180.0
    correctness_seconds: float = 300.0
    timing_seconds: float = 300.0


@attrs.frozen(kw_only=True)
class TimingPolicy:
    method: Literal["auto", "events", "cuda_graph"] = "auto"
    min_pairs: int = 5
    max_pairs: int = 200
    target_ci_percent: float = 0.5
    max_seconds_per_case: float = 6.0
    block_ms: float = 2.0  # a timed block of the faster side aims at this much GPU time
    baseline_blocks: Literal["own", "shared"] = "own"
    """``own``: the baseline's blocks aim at ``block_ms`` of its own work; ``shared``: as many
    calls as the candidate's (a slower baseline then times blocks that much longer)."""
    placements: int = 3
    """Sets of slots (and graphs) per side, each at memory of its own, that a case's pairs rotate
    over (fewer where memory is short; 1: one placement per side, as before 2026-12-06)."""
    between_runs_percent: float = 0.3
    """The spread (a standard deviation, %) of a case's speedup between evaluations that no
    evaluation can see in itself (its processes, the memory pages it got): every CI carries it
    besides what it measured. Measured: ``bench/results/h100-2026-12-06e``."""


@attrs.frozen(kw_only=True)
class Cost:
    """The least work a call can do, as expressions over a case's params (``aka_core.evaluation.cost``):
    bytes that must cross device memory (inputs read once, outputs written once) and FLOPs.
    A measured time below what the target GPU's peak allows is impossible and rejected."""

    bytes: str | None = None
    flops: str | None = None


@attrs.frozen(kw_only=True)
class Harness:
    """A task whose own commands build, check and time its code (a task format that predates
    the judge): run in the workspace, in a sandbox, by ``aka_core.evaluation.harness``. Its record says
    ``trust: harness``: the task's commands decide correctness and time, so the trusted judge's
    guarantees (secret inputs, audits, the judge's clock) do not apply."""

    compile: tuple[str, ...] = ()
    correctness: tuple[str, ...] = ()
    performance: tuple[str, ...] = ()
    report: str | None = None
    """The JSON file (relative to the task's folder) the performance commands write."""
    time_key: str | None = None
    """The key of the report that holds a time in milliseconds (None: the first of
    ``harness.TIME_KEYS`` found)."""
    timeout_s: float = 1800.0
    """Each command's limit."""


@attrs.frozen(kw_only=True)
class HeldOutDraws:
    """Held-out cases drawn by the judge from a per-evaluation secret: which shapes are
    evaluated exists only in the judge's memory until the evaluation is recorded. Each param is a
    fixed value, ``{range: [lo, hi]}`` (integers, inclusive; optional ``multiple_of``) or
    ``{choice: [...]}``."""

    count: int = 2
    params: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class TaskRules:
    """Rules the judge enforces on a candidate, beyond matching the reference."""

    torch_compute: Literal["allowed", "forbidden"] = "allowed"
    """``forbidden``: the candidate may use PyTorch only to allocate, reshape and describe
    tensors; the computation must be the task's kernels (checked statically and at run time)."""
    torch_copies: Literal["allowed", "forbidden"] = "allowed"
    """``forbidden`` (with ``torch_compute: forbidden``): PyTorch may not copy or convert tensor
    data during a call either (``clone``, ``copy_``, ``.to(dtype)``, ``contiguous()`` of a
    non-contiguous tensor count as compute; checked at run time). For tasks whose work is moving
    data: a transpose, a cache write."""
    compute_precision: str | None = None
    """``float32``: outputs may disagree with the float32 reference, once rounded to the output
    dtype, on no more elements than the task's baseline does plus ``max_rounding_mismatch``
    (float32 formulas of GELU differ by under 2% of bf16 elements; float16 arithmetic by 13-22%)."""
    max_rounding_mismatch: float = 0.05


TASK_FILE = "task.yaml"
"""The file that makes a folder a task of the builtin ``operator`` format (other formats have
their own, ``TaskFormatSpec.marker_file``)."""


@attrs.frozen(kw_only=True)
class Task:
    id: str
    root: Path
    format: str
    name: str
    backend: str
    family: str
    editable: tuple[str, ...]
    entrypoint: str
    reference: str
    baseline: str
    inputs: str
    cases: tuple[Case, ...]
    instructions: str
    tolerance: dict[str, Tolerance]
    held_out_cases: tuple[Case, ...] = ()
    smoke_case: Case | None = None
    description: str = ""
    requires: Requirements = attrs.Factory(Requirements)
    timeouts: Timeouts = attrs.Factory(Timeouts)
    timing: TimingPolicy = attrs.Factory(TimingPolicy)
    seeds_per_case: int = 3
    validated_on: tuple[dict[str, Any], ...] = ()
    tags: tuple[str, ...] = ()
    held_out_draws: HeldOutDraws | None = None
    cost: Cost | None = None
    rules: TaskRules = attrs.Factory(TaskRules)
    harness: Harness | None = None
    """Set for tasks judged by their own commands instead of the judge (``Harness``)."""
    judging: str | None = None
    """How the task is judged, in the agent's prompt, for a format with its own judge
    (``TaskFormatSpec.judge``); None: the operator judge's rules (entrypoint, inputs factory,
    reference on secret inputs, held-out cases, ``aka selfcheck``)."""

    @property
    def baseline_is_initial_candidate(self) -> bool:
        return self.baseline.split(":")[0] in self.editable


# --------------------------------------------------------------------------- devices


@attrs.frozen(kw_only=True)
class DeviceInfo:
    kind: Literal["cuda", "cpu"]
    vendor: str | None = None
    name: str | None = None
    architecture: str | None = None
    compute_capability: float | None = None
    software: dict[str, str] = attrs.Factory(dict)


# --------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class AgentUsage:
    """What the agent reported about its own usage; ``None`` where it did not say, never 0 for a
    value it left out. Each CLI plugin maps its CLI's counters to these meanings (the table of
    docs/agents.md, "Usage")."""

    model: str | None = None
    input_tokens: int | None = None
    """All input (prompt) tokens the model processed, cached ones included (read from the cache,
    written to it, or neither)."""
    cached_input_tokens: int | None = None
    """The part of ``input_tokens`` read from the provider's prompt cache."""
    cache_write_tokens: int | None = None
    """The part of ``input_tokens`` written to the provider's prompt cache, where the provider
    counts cache writes apart."""
    output_tokens: int | None = None
    """Generated tokens, reasoning included."""
    reasoning_tokens: int | None = None
    """The part of ``output_tokens`` spent on reasoning, where the CLI reports it."""
    cost_usd: float | None = None
    turns: int | None = None


AgentStatus = Literal["completed", "failed", "timed_out", "not_installed", "not_authenticated",
                      "rate_limited", "max_turns", "budget_exhausted", "infra_error"]
"""How an agent's step ended (docs/agents.md, "Status"): ``completed``; ``failed`` (the agent's own
failure); ``timed_out`` (stopped at the time budget); ``max_turns`` and ``budget_exhausted`` (the
CLI stopped at the turn or spending limit it was given); ``not_installed`` and
``not_authenticated`` (fix the setup); ``rate_limited`` and ``infra_error`` (the provider or the
network failed, not the agent: the lifecycle retries them per ``agent.retry`` and, when retries
run out, ends the task as ``infra_error`` without judging it)."""

PROVIDER_FAILURES: tuple[str, ...] = ("rate_limited", "infra_error")
"""Agent statuses that are not the agent's (nor the candidate's) doing: retried, never scored."""
SETUP_FAILURES: tuple[str, ...] = ("not_installed", "not_authenticated")
"""Agent statuses of a setup the user must fix: the agent never worked, so the untouched
baseline is not judged as its candidate (a trainer would learn a zero from a missing login)."""


@attrs.frozen(kw_only=True)
class AgentExecution:
    agent: str
    status: AgentStatus
    exit_code: int | None = None
    duration_seconds: float = 0.0
    timed_out: bool = False
    version: str | None = None
    message: str | None = None
    usage: AgentUsage = attrs.Factory(AgentUsage)
    confinement: dict[str, Any] | None = None
    """How the agent was confined (``aka_core.kits.agent_sandbox``); None for in-process agents."""
    attempts: int = 1
    """How many times the agent was started for this task (retries after rate limits or
    infrastructure failures included); this record is of the last attempt."""


@attrs.frozen(kw_only=True)
class IntegrityReport:
    ok: bool
    changed_files: tuple[str, ...] = ()
    restored_files: tuple[str, ...] = ()
    """Protected files the agent changed or removed; restored from the task before evaluation."""
    added_files: tuple[str, ...] = ()
    """Files the agent added; kept in the workspace, ignored unless imported by editable files."""
    outside_changes: tuple[str, ...] = ()
    """Task files changed outside the workspace during the agent step (the task's own folder or
    the run's preserved copy): the evaluation uses an intact copy and the candidate is rejected."""

    @property
    def evaluator_files_intact(self) -> bool:
        return not self.outside_changes


@attrs.frozen(kw_only=True)
class Gate:
    name: str
    passed: bool
    detail: str = ""


@attrs.frozen(kw_only=True)
class Acceptance:
    accepted: bool
    reason: str
    gates: tuple[Gate, ...] = ()


@attrs.frozen(kw_only=True)
class CaseTimes:
    """One timed case as a scorer sees it: median per-call times and the case's speed-of-light
    time (the declared bytes and FLOPs at the GPU's peak; None where the task declares no cost)."""

    case: str
    baseline_ms: float
    candidate_ms: float
    speed_of_light_ms: float | None = None


@attrs.frozen(kw_only=True)
class EvaluationSummary:
    """What a scorer sees."""

    accepted: bool
    performance_measured: bool
    speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    cases: tuple[CaseTimes, ...] = ()
    """The timed cases (empty when performance was not measured)."""


@attrs.frozen(kw_only=True)
class ScoreOutcome:
    score: float
    eligible: bool
    reason: str = ""
    details: dict[str, Any] = attrs.Factory(dict)


TaskStatus = Literal["completed", "compile_only", "skipped", "error", "infra_error"]
"""``infra_error``: the evaluator, the host or the agent's provider failed (a worker killed from
outside, a missing compiler, confinement unavailable, the GPU taken by another process, the agent
rate-limited or its provider down past its retries): the candidate was not judged, the score is 0
and means nothing; retry."""


@attrs.frozen(kw_only=True)
class TaskResult:
    """The record of truth for one task of a run (``<task>/task_result.yaml``)."""

    task_id: str
    status: TaskStatus
    family: str | None = None
    backend: str | None = None
    skip_reason: str | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_seconds: float | None = None
    agent_execution: AgentExecution | None = None
    integrity: IntegrityReport | None = None
    pass_compilation: bool | None = None
    pass_correctness: bool | None = None
    candidate_accepted: bool = False
    acceptance: Acceptance | None = None
    speedup_ratio: float | None = None
    score: float = 0.0
    scorer: dict[str, Any] = attrs.Factory(dict)
    evaluation: EvaluationRecord = attrs.field(factory=EvaluationRecord, converter=as_record)
    """The evaluator's full record: device, phases, compile, correctness, performance (raw
    samples), failure (``aka_core.evaluation.record``; a mapping given here is structured)."""
    schema_version: int = 1

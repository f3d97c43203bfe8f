"""The evaluation record, typed where the core reads it (``TaskResult.evaluation``).

A judge (the operator judge's process, a format's own judge such as e2e's, a task's harness)
produces its record as JSON: it is free to add keys. The core structures that JSON once, where it
reads it (``aka_core.run.lifecycle.evaluate``, through ``aka_core.convert``), into the classes below:
the parts it decides on (failure, correctness, performance, compile-only, confinement, rules,
integrity) and what the judges write for a reader (kernel caches, pre-started runners, the GPU's
state, timing details, diagnostics, a format's own section: ``e2e``, ``harness``) are typed
fields. A key no class here names (a judge newer than this reader, a plugin's own) is kept, as it
came, in its part's ``extra``.

Each part is an ``OpenRecord``: it remembers which keys it was read with and in what order
(``present``), so that writing it back gives the same keys in the same order (a key that held
null is written as null again); a field set later, and not null, is written after them. Old
``task_result.yaml`` files therefore load and are written back unchanged.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from aka_core.convert import converter
from aka_core.evaluation.failures import FailureKind

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
"""A value as JSON holds it: what a judge may record beyond the typed fields."""

Number: TypeAlias = int | float
"""A number as the judge wrote it: an int stays an int and a float a float (a field typed
``float`` would turn ``3`` into ``3.0``, and the record would no longer be written back as it
was read)."""


@attrs.frozen(kw_only=True)
class OpenRecord:
    """A part of the record: typed fields, plus the keys a judge added that the core does not
    read (``extra``), in the order they were read (``present``)."""

    extra: dict[str, Json] = attrs.field(factory=dict, repr=False)
    """Keys of this part that have no field here, with their values as the judge wrote them."""
    present: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    """The keys this part was read with, in order (empty for a part made in code)."""

    _RESERVED: ClassVar[frozenset[str]] = frozenset({"extra", "present"})

    def without(self, *keys: str) -> typing.Self:
        """This part with ``keys`` removed (fields set to None, extra keys dropped)."""
        fields = {f.name for f in attrs.fields(type(self))} - self._RESERVED
        return attrs.evolve(
            self,
            **{k: None for k in keys if k in fields},
            extra={k: v for k, v in self.extra.items() if k not in keys},
            present=tuple(k for k in self.present if k not in keys),
        )

    def with_extra(self, **values: Json) -> typing.Self:
        """This part with keys that have no field set (added after those it was read with)."""
        return attrs.evolve(self, extra={**self.extra, **values})

    def unknown_keys(self) -> list[str]:
        """The path of every key kept in an ``extra``, in this part and the parts below it
        (``performance.cases[0].foo``): what a judge wrote that no class here names."""
        found = list(self.extra)
        for f in attrs.fields(type(self)):
            if f.name not in self._RESERVED:
                found += [f"{f.name}{path}" for path in _unknown_below(getattr(self, f.name))]
        return found


def _unknown_below(value: object) -> list[str]:
    """``unknown_keys`` of the parts in ``value`` (a part, or a list or mapping of them), each
    path starting with how to reach it (``.name``, ``[0]``, ``.side``)."""
    if isinstance(value, OpenRecord):
        return [f".{path}" for path in value.unknown_keys()]
    if isinstance(value, list):
        return [f"[{i}]{path}" for i, item in enumerate(value) for path in _unknown_below(item)]
    if isinstance(value, dict):
        return [f".{key}{path}" for key, item in value.items() for path in _unknown_below(item)]
    return []


# --------------------------------------------------------------------------- the parts


@attrs.frozen(kw_only=True)
class Failure(OpenRecord):
    """What stopped the evaluation: its kind (whose fault), the phase, and where."""

    kind: FailureKind
    message: str = ""
    phase: str | None = None
    retryable: bool | None = None
    file: str | None = None
    line: int | None = None
    side: str | None = None
    case: str | None = None
    stage: str | None = None
    """``first_call``: the candidate built, then failed in its first call."""
    cause: str | None = None
    """``interference_band``: the baseline ran 3-10% slower beside the candidate's process than
    alone (an ``infra_error``: too little to blame, too much to trust); ``placement`` then says
    whether alone was on the same memory (``same``: the reward service blames a candidate that
    reads this in every attempt, on a GPU whose clocks held: ``performance.gpu_state``) or on
    new memory (``new``). ``disk_limit``: the side was killed for filling the disk
    (``disk_watch``); ``memory_limit``: for the host memory or the processes it held
    (``memory_watch``); ``unasked_descriptors``: for what it sent on the judge's descriptor
    socket unasked (``sides.RunnerProcess.unasked``, a ``protocol`` failure)."""
    placement: str | None = None
    traceback: str | None = None
    log_tail: str | None = None
    exit_code: int | None = None
    """The judge process's exit status, where it exited without a record."""
    arm: str | None = None
    """e2e: the arm (``baseline``, ``candidate``) whose engine failed."""
    engine_phase: str | None = None
    """e2e: the engine's own step when a timed run failed (``phase`` is then ``timing``)."""
    entrypoint: str | None = None
    """e2e: the kernel entrypoint the operator oracle found wrong."""
    audit: E2EAudit | None = None
    """e2e: the audit of the timed runs that found the candidate's tokens wrong."""

    def text(self) -> str:
        """The message with the file and line it names, if any."""
        where = ""
        if self.file:
            where = f" ({self.file}" + (f":{self.line}" if self.line else "") + ")"
        return f"{self.message}{where}"


@attrs.frozen(kw_only=True)
class RoundingMismatch(OpenRecord):
    candidate: float
    allowed: float


@attrs.frozen(kw_only=True)
class Check(OpenRecord):
    """One correctness check (a case and seed, or a harness command)."""

    case: str | None = None
    seed_index: int | None = None
    held_out: bool | None = None
    passed: bool | None = None
    reason: str | None = None
    max_abs_err: float | None = None
    rel_l2: float | None = None
    baseline_rel_l2: float | None = None
    rounding_mismatch: RoundingMismatch | None = None
    params: dict[str, Json] | None = None
    """A drawn held-out case's parameters."""
    run: int | None = None
    """Which call on the same inputs differed (2: the repeat of a call that matched)."""
    command: str | None = None
    """harness: the task's correctness command."""
    worst: Number | None = None
    """e2e: the operator oracle's worst error, relative to its tolerance."""
    max_regret: Number | None = None
    """e2e: the model oracle's largest regret of a token (nats)."""
    mean_regret: Number | None = None


@attrs.frozen(kw_only=True)
class Correctness(OpenRecord):
    passed: bool = False
    checks: list[Check] = attrs.Factory(list)
    steps_s: dict[str, Number] | None = None
    """The judge's seconds by step of the phase (diagnostics): making inputs, the reference, the
    sides' calls, the comparisons."""


@attrs.frozen(kw_only=True)
class Samples(OpenRecord):
    """Per-call times (ms) of the timed pairs, in order."""

    baseline: list[float] = attrs.Factory(list)
    candidate: list[float] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class CleanPhase(OpenRecord):
    """The baseline alone, after the candidate's process was killed: block times (ms)."""

    windows_ms: list[Number] | None = None
    touch_windows_ms: list[Number] | None = None
    """Blocks that only touch their inputs: the fixed cost of a block."""
    placement: str | None = None
    """``same``: on the arena and graph of the case's pairs (kept for it); ``new``: on new ones
    (no room was left to keep them); ``held_by_candidate``: new ones, because the candidate's
    processes held the memory they would have been kept in (judged as ``same``)."""
    placements: list[int] | None = None
    """The placement each clean block ran on (``same``: those of the pairs, in turn)."""
    set_aside_refused: dict[str, Json] | None = None
    """Why they were not kept: ``why`` (``room``: the share for kept arenas was spent;
    ``free``: under half the GPU's memory was free, with that share and what held memory then)."""
    held_by_candidate_share: Number | None = None
    """The share of the GPU the candidate's processes held when the case was refused for lack of
    free memory (``timing.held_by_candidate``)."""


@attrs.frozen(kw_only=True)
class Interference(OpenRecord):
    """The baseline's time while the candidate's process was alive against alone after it."""

    clean_baseline_ms: Number | None = None
    interleaved_baseline_ms: Number | None = None
    ratio: Number | None = None
    by_placement: list[Number] | None = None
    """Each placement's ratio, where the clean phase ran on the pairs' placements: ``ratio`` is
    then their geometric mean (the pooled medians above mix placements that differ)."""
    limit: Number | None = None
    input_copy_ms: dict[str, Number] | None = None
    """Per side: the median time of the judge's copy of a block's inputs and the L2 flush after it
    (the judge's own work before the window)."""


@attrs.frozen(kw_only=True)
class TpotGate(OpenRecord):
    """e2e: the p99 time per output token of each arm (ms) and the workload's limit."""

    baseline_p99_ms: Number | None = None
    candidate_p99_ms: Number | None = None
    limit_ms: Number | None = None
    passed: bool | None = None
    """None where the workload sets no limit."""


@attrs.frozen(kw_only=True)
class LaunchQueueRelease(OpenRecord):
    """A block a side could not enqueue behind "go", released untimed; the case was timed again
    with blocks of an eighth as many calls."""

    side: str | None = None
    calls_per_block: int | None = None


@attrs.frozen(kw_only=True)
class PerformanceCase(OpenRecord):
    """One timed case: median per-call times, the paired speedup, the raw samples, and how the
    judge timed it (its blocks, the clean phase, the interference check)."""

    case: str
    held_out: bool | None = None
    method: str | None = None
    pairs: int | None = None
    speedup: float | None = None
    ci95: list[float] | None = None
    baseline_median_ms: float | None = None
    candidate_median_ms: float | None = None
    speed_of_light_ms: float | None = None
    reference_ms: float | None = None
    """The task's reference timed alone (``aka validate --run``)."""
    samples_ms: Samples | None = None
    calls_per_block: int | None = None
    """Calls in the candidate's blocks (``block_ms`` of the faster side's work)."""
    baseline_calls_per_block: int | None = None
    """Calls in the baseline's blocks (``block_ms`` of its own work; at most ``calls_per_block``)."""
    estimate_ms: dict[str, Number] | None = None
    """Per side: the first estimate of a call's time, which sets the calls per block."""
    graph_fallback: str | None = None
    """Why the case was timed eagerly: the baseline could not be captured in a CUDA graph."""
    candidate_method: str | None = None
    candidate_graph_failure: str | None = None
    baseline_capture_retried: str | None = None
    """Why the baseline's capture, beside the candidate's, failed once before it was captured
    alone."""
    graph_resized: dict[str, Number] | None = None
    """Graph blocks sized again from replays: ``from`` and ``to`` calls per block (the baseline's:
    ``baseline_to``), the faster side's replayed call's ms (``kept``: a side could not replay
    the new blocks, the earlier ones were timed)."""
    launch_queue: list[LaunchQueueRelease] | None = None
    """Blocks the baseline could not enqueue (released untimed), in order."""
    placements: int | None = None
    """Sets of slots (and graphs) per side the pairs rotated over, each at memory of its own:
    where a call's buffers lie moves its time (``timing.placements``; fewer where memory was
    short)."""
    pair_placements: list[int] | None = None
    """The placement each pair ran on, in order (rounds of every placement, order drawn)."""
    placement_sized: dict[str, Number] | None = None
    """Blocks shrunk (both sides alike, to a quarter at most) so that more placements fit:
    ``calls_from``/``calls_to``, ``baseline_from``/``baseline_to``."""
    stop_reason: str | None = None
    """``ci_target``, ``max_pairs``, ``time_cap`` or ``phase_limit``."""
    audits: int | None = None
    audit_sample_elements: int | None = None
    seconds: Number | None = None
    windows_ms: dict[str, list[Number]] | None = None
    """Per side: each timed block's time (ms), the block's fixed cost included."""
    overhead_interleaved_ms: Number | None = None
    touch_windows_ms: list[Number] | None = None
    input_copy_ms: dict[str, Number] | None = None
    clean: CleanPhase | None = None
    overhead_ms: Number | None = None
    """The fixed cost of a block, subtracted from every window."""
    interference: Interference | None = None
    ratio_of_medians: Number | None = None
    spread: Number | None = None
    """e2e: the spread of the paired ratios."""
    aa_floor: Number | None = None
    aa_ratios: list[Number] | None = None
    stopped: str | None = None
    """e2e: why no further pair ran (``floor``, ``max_pairs``, ``time``)."""
    p99_tpot: TpotGate | None = None

    def times(self) -> tuple[float, float, float | None] | None:
        """(baseline, candidate, speed of light) in ms when both medians are positive finite
        numbers (the speed of light only where it is one too), else None."""
        base, cand, sol = self.baseline_median_ms, self.candidate_median_ms, self.speed_of_light_ms
        if not all(v is not None and math.isfinite(v) and v > 0 for v in (base, cand)):
            return None
        assert base is not None and cand is not None
        return base, cand, sol if sol is not None and math.isfinite(sol) and sol > 0 else None


@attrs.frozen(kw_only=True)
class Performance(OpenRecord):
    """The timing: measured (and the speedup with its 95% CI), or why not."""

    measured: bool = False
    reason_not_measured: str | None = None
    speedup: float | None = None
    ci95: list[float] | None = None
    method: list[str] | None = None
    description: str | None = None
    cases: list[PerformanceCase] | None = None
    candidate_memory: dict[str, Number] | None = None
    """The GPU memory the candidate's processes gave back when killed before the clean phase
    (``freed_when_killed_bytes``) and the GPU's (``gpu_bytes``)."""
    between_runs: Number | None = None
    """The standard deviation (in logs) per case that the CIs carry besides what the
    evaluation measured: what moves a case from one evaluation to the next that no evaluation
    sees in itself (``timing.between_runs_percent``)."""
    flush: str | None = None
    """How the L2 cache was flushed before each block."""
    gpu_lock_wait_s: Number | None = None
    holder_cpus: HolderCpus | None = None
    gpu_state: GpuStates | None = None
    judge_block_steps_s: dict[str, Number] | None = None
    """The judge's own seconds per step of its blocks (diagnostics)."""
    judge_stages_s: dict[str, Number] | None = None
    """The judge's seconds per stage of its cases (diagnostics): setting up slots, estimating,
    capturing, the pairs, the clean phase."""
    unit: str | None = None
    """e2e: what a case's times measure (ms per output token)."""
    cpu_diagnostic: Performance | None = None
    """e2e on a CPU: the timing the engines gave there, never scored."""


@attrs.frozen(kw_only=True)
class HolderCpus(OpenRecord):
    """The CPUs the judge moved its processes onto while it held the GPU, away from the
    evaluations starting meanwhile (``holder_cpus``)."""

    cpus: str | None = None
    """A Linux CPU list, ``12-15``."""
    threads_moved: int | None = None
    threads_refused: int | None = None


@attrs.frozen(kw_only=True)
class GpuState(OpenRecord):
    """The GPU's clocks, temperature and power (``gpu_state.read``), or why they are unknown."""

    sm_mhz: Number | None = None
    memory_mhz: Number | None = None
    temperature_c: Number | None = None
    power_w: Number | None = None
    clock_event_reasons: str | None = None
    """The active clock-event reasons, a bit mask as nvidia-smi prints it."""
    error: str | None = None


@attrs.frozen(kw_only=True)
class GpuStates(OpenRecord):
    """The GPU's state at the start of the timing phase, at the end of its pairs (the longest
    load), and at its end (the clean phase)."""

    start: GpuState | None = None
    pairs_end: GpuState | None = None
    end: GpuState | None = None


@attrs.frozen(kw_only=True)
class Device(OpenRecord):
    """The device the judge ran on (a backend's ``describe_device``)."""

    kind: str | None = None
    vendor: str | None = None
    name: str | None = None
    architecture: str | None = None
    compute_capability: Number | None = None
    software: dict[str, str] | None = None


@attrs.frozen(kw_only=True)
class DeviceMemory(OpenRecord):
    """The GPU's memory when the judge started; ``shared``: less than half of it was free."""

    free_gib: Number | None = None
    total_gib: Number | None = None
    shared: bool | None = None


@attrs.frozen(kw_only=True)
class CompileOnly(OpenRecord):
    """A compile-only evaluation: built for ``architecture`` on a host without that GPU."""

    architecture: str | None = None
    built: list[str] = attrs.Factory(list)
    note: str = ""
    sides: dict[str, dict[str, Json]] | None = None
    """Per side: what its backend reported it built."""


@attrs.frozen(kw_only=True)
class SandboxRecord(OpenRecord):
    """What confined one process (``sandbox.apply``), or why it was not."""

    landlock_abi: int | None = None
    filesystem: str | None = None
    network: str | None = None
    capabilities: str | None = None
    scoped: list[str] | None = None
    other_processes: str | None = None
    """What the seccomp filter refuses that names another process (``seccomp``)."""
    max_file_bytes: int | None = None
    scheduling: str | None = None
    """What the runner may not raise of its own scheduling (its real-time class, its priority)."""
    out_of_memory: str | None = None
    """Its score for the kernel's OOM killer, and whether it can lower it (``OOM_SCORE_ADJ``)."""
    confined: bool | None = None
    reason: str | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class Confinement(OpenRecord):
    """How the runners were confined: the operator judge records each side's sandbox under its
    name, a harness or the e2e judge under ``sides``."""

    policy: str | None = None
    confined: bool = False
    baseline: SandboxRecord | None = None
    candidate: SandboxRecord | None = None
    sides: dict[str, SandboxRecord] | None = None


@attrs.frozen(kw_only=True)
class Rules(OpenRecord):
    torch_compute: str | None = None
    torch_copies: str | None = None
    compute_precision: str | None = None
    static_violations: list[str] | None = None
    torch_ops_seen: list[str] | None = None


@attrs.frozen(kw_only=True)
class CompileStep(OpenRecord):
    passed: bool | None = None
    seconds: float | None = None
    sides: dict[str, dict[str, Json]] | None = None
    steps_s: dict[str, Number] | None = None
    """The judge's seconds by step of the phase (diagnostics): the sides' code loaded, the rules,
    the first inputs and reference, the sides' first calls."""
    """Per side: what its backend reported it built (e2e: each arm's kernel digest, load time)."""


@attrs.frozen(kw_only=True)
class EvaluatorIntegrity(OpenRecord):
    files: int
    digest: str
    unchanged: bool


@attrs.frozen(kw_only=True)
class WallClockCheck(OpenRecord):
    """The judge's own clock agreed with the event time of every timed block."""

    passed: bool | None = None
    blocks: int | None = None
    note: str | None = None


# --------------------------------------------------------------------------- what the judge keeps


@attrs.frozen(kw_only=True)
class KernelCacheSave(OpenRecord):
    """What the judge kept of a side's compiled kernels after its runner was gone."""

    saved: bool = False
    reason: str | None = None
    seconds: Number | None = None
    files: int | None = None
    bytes: int | None = None
    saved_at: Number | None = None


@attrs.frozen(kw_only=True)
class KernelCacheUse(OpenRecord):
    """One side's compiled kernels (``kernel_cache``): restored before its runner started (or
    why not), and kept after (``saved``)."""

    key: str | None = None
    """The first 16 hex digits of the entry's key; None where the side has no key."""
    used: bool | None = None
    reason: str | None = None
    files: int | None = None
    bytes: int | None = None
    seconds: Number | None = None
    saved: KernelCacheSave | None = None


@attrs.frozen(kw_only=True)
class PrebuildSide(OpenRecord):
    """One side's build before the GPU lock (``prebuild``): whether a builder ran, and how it
    ended (``built``: its code loaded, and for a ``call`` builder its calls ran; ``failed``,
    ``timeout``, ``not started``); its failure is never the side's."""

    ran: bool | None = None
    outcome: str | None = None
    reason: str | None = None
    seconds: Number | None = None
    confined: bool | None = None
    calls: int | None = None
    """``call`` builders (Triton): the side's function called once per case whose shapes were
    known, ``calls_failed`` of them raising; ``shapes_unknown`` cases left to the runner."""
    calls_failed: int | None = None
    shapes_unknown: int | None = None
    started_ahead: bool | None = None
    """The builder was started with the judge, before the request (``warm``)."""


@attrs.frozen(kw_only=True)
class WarmUse(OpenRecord):
    """Whether the runners started ahead of the request (``warm``) served it, and why not."""

    used: bool = False
    reason: str | None = None


@attrs.frozen(kw_only=True)
class RunnerOpStats(OpenRecord):
    """One kind of request to a runner: how many, their round trips, the runner's busy time."""

    count: int = 0
    round_trip_s: Number | None = None
    busy_s: Number | None = None
    steps_s: dict[str, Number] | None = None


@attrs.frozen(kw_only=True)
class QuickCompares(OpenRecord):
    """The judge's quick comparisons: how many ran as one GPU kernel or as PyTorch operators,
    how many bit-exact outputs were met by one ``torch.equal``, the timed audits' flags, and
    why the kernel failed where it did."""

    fused: int = 0
    pytorch: int = 0
    equal: int = 0
    # The timed audits' flags: by the kernel, by PyTorch, and the kernel's raised flags that
    # PyTorch's exact flag settled.
    audits: dict[str, int] | None = None
    fused_error: str | None = None


@attrs.frozen(kw_only=True)
class Diagnostics(OpenRecord):
    runner_ops: dict[str, dict[str, RunnerOpStats]] | None = None
    """Per side, per request kind (``init``, ``load``, ``call`` ...)."""
    quick_compare: QuickCompares | None = None
    disk: DiskUse | None = None
    memory: MemoryUse | None = None


@attrs.frozen(kw_only=True)
class DiskUse(OpenRecord):
    """The sides' disk use, watched while they lived (``disk_watch``)."""

    limit_bytes: int | None = None
    walks: int | None = None
    """How many times a side's folders were walked (the first time, then only when the file
    system's free space fell by enough for a side to be over the limit)."""
    peak_bytes: dict[str, int] | None = None
    """Per side: the most its scratch folders and its deleted, still open files held at once."""


@attrs.frozen(kw_only=True)
class MemoryUse(OpenRecord):
    """The sides' host memory, watched while they lived (``memory_watch``)."""

    limit_bytes: int | None = None
    measures: int | None = None
    """How many times a side was measured (every second, and whenever the host's available
    memory fell by enough for a side to be over the limit, or ran short)."""
    peak_bytes: dict[str, int] | None = None
    """Per side: the most its processes' anonymous and shared pages, swap and memory files
    held at once."""
    least_available_bytes: int | None = None
    """The host's least available memory the watch read (``MemAvailable``)."""
    host_short: bool | None = None
    """Whether the host's available memory fell below the watch's reserve (a tenth of it)."""


# --------------------------------------------------------------------------- a harness's section


@attrs.frozen(kw_only=True)
class HarnessCommands(OpenRecord):
    """The task's own commands that judged it (``aka_core.evaluation.harness``)."""

    compile: list[str] | None = None
    correctness: list[str] | None = None
    performance: list[str] | None = None
    report: str | None = None
    """The performance commands' JSON report, relative to the folder they ran in."""


@attrs.frozen(kw_only=True)
class HarnessStep(OpenRecord):
    """One command a harness ran: its exit status (None: killed at its limit) and log."""

    side: str | None = None
    phase: str | None = None
    command: str | None = None
    exit: int | None = None
    seconds: Number | None = None
    log: str | None = None
    added_disk_bytes: int | None = None
    """The most it had added to its folder when the disk watch looked (``disk_watch``)."""
    peak_memory_bytes: int | None = None
    """The most host memory its processes held when the memory watch looked."""
    stopped: str | None = None
    """Why a watch killed it (over the disk or memory limit), if one did."""


# --------------------------------------------------------------------------- e2e's section


@attrs.frozen(kw_only=True)
class E2EArm(OpenRecord):
    """What an arm's engine reported when it loaded its kernel tree."""

    kernel_digest: str | None = None
    entrypoints_called: list[Json] | None = None
    log: str | None = None


@attrs.frozen(kw_only=True)
class ToolchainControl(OpenRecord):
    """A control engine (a known-good Triton kernel) started when the candidate's failed."""

    passed: bool = False
    message: str | None = None


@attrs.frozen(kw_only=True)
class RegretSummary(OpenRecord):
    """The FP32 reference's verdict on an arm's sequences (``oracle.summarize``)."""

    sequences: int | None = None
    tokens: int | None = None
    max_regret: Number | None = None
    mean_regret: Number | None = None
    max_logprob_error: Number | None = None
    mismatches: int | None = None


@attrs.frozen(kw_only=True)
class RegretAllowance(OpenRecord):
    """The regrets the candidate may show: the workload's bounds, or twice the baseline's."""

    max_regret: Number | None = None
    mean_regret: Number | None = None


@attrs.frozen(kw_only=True)
class ModelOracle(OpenRecord):
    baseline: RegretSummary | None = None
    candidate: RegretSummary | None = None
    allowance: RegretAllowance | None = None
    prompts: int | None = None
    output_len: int | None = None


@attrs.frozen(kw_only=True)
class E2EOracle(OpenRecord):
    operator: dict[str, dict[str, Number]] | None = None
    """Per arm, per entrypoint: the worst error relative to its tolerance."""
    model: ModelOracle | None = None


@attrs.frozen(kw_only=True)
class AuditedRuns(OpenRecord):
    runs: int | None = None
    max_regret: Number | None = None
    mean_regret: Number | None = None


@attrs.frozen(kw_only=True)
class E2EAudit(OpenRecord):
    """A case's audit of its timed runs: a secret sample of each run's sequences, scored."""

    sampled_per_run: int | None = None
    baseline: AuditedRuns | None = None
    candidate: AuditedRuns | None = None
    allowance: RegretAllowance | None = None


@attrs.frozen(kw_only=True)
class E2ERun(OpenRecord):
    """One timed run of an engine (``measure.RunSample``)."""

    arm: str | None = None
    pair: int | None = None
    position: int | None = None
    throughput: Number | None = None
    duration_s: Number | None = None
    tokens: int | None = None
    requests: int | None = None
    ttft_ms: list[Number] | None = None
    tpot_ms: list[Number] | None = None
    wall_start: Number | None = None


@attrs.frozen(kw_only=True)
class E2EPair(OpenRecord):
    """A baseline run and a candidate run, in ``order``; ``ratio``: candidate / baseline
    throughput."""

    index: int | None = None
    order: list[str] | None = None
    ratio: Number | None = None
    baseline: E2ERun | None = None
    candidate: E2ERun | None = None


@attrs.frozen(kw_only=True)
class E2ESection(OpenRecord):
    """The e2e judge's own section (``evaluation.e2e``): the workload, each arm's engine, the
    oracles, and the raw pairs of the timing."""

    arms: dict[str, E2EArm] | None = None
    engine: str | None = None
    model: str | None = None
    workload_digest: str | None = None
    weights_digest: str | None = None
    lock: str | None = None
    entrypoints: list[str] | None = None
    editable: list[str] | None = None
    correctness_seed: int | str | None = None
    """The workload's seed, or ``secret`` where the held-out secret drew the prompts."""
    prompts: str | None = None
    added_files: list[str] | None = None
    toolchain_control: ToolchainControl | None = None
    oracle: E2EOracle | None = None
    pairs: dict[str, list[E2EPair]] | None = None
    audits: dict[str, E2EAudit] | None = None
    tpot: dict[str, TpotGate] | None = None


# --------------------------------------------------------------------------- the record


@attrs.frozen(kw_only=True)
class EvaluationRecord(OpenRecord):
    """The evaluator's full record (``<task>/task_result.yaml``'s ``evaluation``).

    ``judge`` names a format's own judge (``e2e``); absent for the operator judge. ``trust`` is
    ``harness`` where the task's own commands judged it.
    """

    judge: str | None = None
    trust: str | None = None
    trust_note: str | None = None
    phases: dict[str, float] | None = None
    warm: WarmUse | None = None
    kernel_cache: dict[str, KernelCacheUse] | None = None
    """Per side: its compiled kernels from the store, and what was kept of them."""
    prebuild: dict[str, PrebuildSide] | None = None
    """Per side: its native library built before the GPU lock, by a process without the GPU."""
    harness: HarnessCommands | None = None
    e2e: E2ESection | None = None
    device: Device | None = None
    device_memory: DeviceMemory | None = None
    confinement: Confinement | None = None
    rules: Rules | None = None
    compile: CompileStep | None = None
    compile_only: CompileOnly | None = None
    correctness: Correctness | None = None
    performance: Performance | None = None
    wall_clock_check: WallClockCheck | bool | None = None
    """The judge's own clock agreed with every timed block (operator: its check; e2e: true)."""
    steps: list[HarnessStep] | None = None
    """harness: every command run, in order."""
    failure: Failure | None = None
    traceback: str | None = None
    """A task that failed before its evaluation: where the lifecycle stopped."""
    cleanup_error: str | None = None
    """The judge's cleanup failed after its record was made."""
    diagnostics: Diagnostics | None = None
    logs: dict[str, str] | None = None
    phases_wall: dict[str, float] | None = None
    wall_seconds: float | None = None
    worker_log: str | None = None
    evaluator_integrity: EvaluatorIntegrity | None = None
    worker_log_tail: str | None = None
    candidate_log_tail: str | None = None
    baseline_log_tail: str | None = None

    @property
    def failure_kind(self) -> FailureKind | None:
        return self.failure.kind if self.failure is not None else None

    def correctness_passed(self) -> bool:
        return self.correctness is not None and self.correctness.passed

    def enforced_rules(self) -> bool:
        """The task's rules were enforced (PyTorch compute forbidden, or a precision rule)."""
        return self.rules is not None and (
            self.rules.torch_compute == "forbidden" or bool(self.rules.compute_precision)
        )


@attrs.frozen(kw_only=True)
class Gates:
    """The gates of an evaluation record (``evaluate.outcome``): compiled? correct? measured?"""

    compile_only: bool
    pass_compilation: bool | None
    pass_correctness: bool | None
    performance_measured: bool
    speedup: float | None
    ci95: tuple[float, float] | None
    failure_kind: FailureKind | None
    task_error: bool
    infra_error: bool


def as_record(value: EvaluationRecord | Mapping[str, Any]) -> EvaluationRecord:
    """``value`` as a record: a mapping (a judge's JSON, a record read from disk) is structured."""
    if isinstance(value, EvaluationRecord):
        return value
    return converter.structure(dict(value), EvaluationRecord)


# --------------------------------------------------------------------------- conversion


def _is_open(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, OpenRecord)


def _structure_hook(cls: type[OpenRecord]) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in attrs.fields(cls)} - OpenRecord._RESERVED

    def structure(data: Any, _: Any) -> OpenRecord:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a mapping, found {type(data).__name__}")
        known = {}
        for key, value in data.items():
            if key in names:
                known[key] = converter.structure(value, hints[key])
        extra = {str(k): v for k, v in data.items() if k not in names}
        return cls(**known, extra=extra, present=tuple(str(k) for k in data))

    return structure


def _unstructure_hook(cls: type[OpenRecord]) -> Any:
    names = [f.name for f in attrs.fields(cls) if f.name not in OpenRecord._RESERVED]
    fields = set(names)
    defaults = {
        f.name: f.default.factory()
        if isinstance(f.default, attrs.Factory)  # type: ignore[arg-type]
        else f.default
        for f in attrs.fields(cls)
        if f.default is not attrs.NOTHING
    }

    def written(obj: OpenRecord, key: str, value: Any) -> bool:
        """A key read is written back; else a field that holds something (in a part read
        from JSON: something else than its default, which the judge did not write)."""
        if key in obj.present:
            return True
        if value is None:
            return False
        return not obj.present or key not in defaults or value != defaults[key]

    def unstructure(obj: OpenRecord) -> dict[str, Any]:
        seen = set(obj.present)
        order = [
            *obj.present,
            *(n for n in names if n not in seen),
            *(k for k in obj.extra if k not in seen and k not in fields),
        ]
        out: dict[str, Any] = {}
        for key in order:
            if key in fields:
                value = getattr(obj, key)
                if not written(obj, key, value):
                    continue
                out[key] = converter.unstructure(value)
            elif key in obj.extra:
                out[key] = obj.extra[key]
        return out

    return unstructure


_SCALARS = frozenset({bool, int, float, str, type(None)})


def _is_scalar_union(cls: Any) -> bool:
    """``int | float``, ``int | str | None``: a union of two or more JSON scalars (``float |
    None`` is left to cattrs)."""
    if typing.get_origin(cls) not in (typing.Union, types.UnionType):
        return False
    args = set(typing.get_args(cls))
    return args <= _SCALARS and len(args - {type(None)}) >= 2


def _scalar_union_hook(cls: Any) -> Any:
    allowed = typing.get_args(cls)

    def structure(value: Any, _: Any) -> Any:
        # The value as it came, if it is one of the union's types (a bool is not a number).
        if type(value) in allowed or (type(value) is int and float in allowed):
            return value
        raise TypeError(f"expected {cls}, found {type(value).__name__} {value!r:.60}")

    return structure


_JSON_KINDS = frozenset({bool, int, float, str, list, dict, type(None)})


def _is_json(cls: Any) -> bool:
    """``Json`` (also where ``typing.get_type_hints`` resolved its inner names, which makes
    another union of the same kinds)."""
    if typing.get_origin(cls) not in (typing.Union, types.UnionType):
        return False
    return {typing.get_origin(a) or a for a in typing.get_args(cls)} == _JSON_KINDS


def _structure_wall_clock_check(value: Any, _: Any) -> WallClockCheck | bool | None:
    if value is None or isinstance(value, bool):
        return value
    return converter.structure(value, WallClockCheck)


converter.register_structure_hook_factory(_is_scalar_union, _scalar_union_hook)
converter.register_structure_hook_func(_is_json, lambda value, _: value)  # kept as it came
converter.register_structure_hook(WallClockCheck | bool | None, _structure_wall_clock_check)
converter.register_structure_hook_factory(_is_open, _structure_hook)
converter.register_unstructure_hook_factory(_is_open, _unstructure_hook)
converter.register_unstructure_hook(FailureKind, lambda kind: kind.value)

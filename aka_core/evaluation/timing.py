"""Timing by the judge's clock: blocks of calls in the runners, interleaved, audited.

A sample is a *block*: ``K`` calls of one side, each on its own fresh inputs. The runner enqueues
the block behind a "go" word in the judge's arena and answers; the judge then, on its own stream,
records its start event, copies the block's inputs into the arena (before this copy no input of
the block exists anywhere the runner can see), reads a buffer twice the size of L2 (so no line of
the inputs is cached, and none is dirty: the copy's lines are written back here, outside the
window), records the window's start, writes "go", waits for the runner's "done" word and records
the window's end. The window, on the judge's events, is
``o + K * t``: ``o`` is the fixed cost of handing the GPU from the judge's context to the runner's
and back (about 0.3 ms on an H200, measured with blocks of one trivial kernel), ``t`` the time of
one call. Each side's blocks are sized so that its ``K * t`` is ``block_ms``: the candidate's on
the faster side's call (it cannot make its own blocks shorter), the baseline's on its own (a
baseline 10x slower would otherwise spend 10x ``block_ms`` per block). A pair's blocks call on
the same inputs, the baseline's on the first of them.

Baseline and candidate blocks alternate in pairs, in an order drawn from the secret; each pair's
blocks get the same inputs; a case's speedup is the median of the pairs' ratios with a
distribution-free CI. Microsecond kernels are replayed as one CUDA graph of the ``K`` calls (the
baseline decides: if it can be captured, both sides are replayed; a candidate that cannot be is
timed with plain launches, at its own cost).

A block the baseline cannot enqueue is released, never timed: calls that launch more kernels than
the GPU's launch queue holds wait for room that only the block itself, held behind "go", would
free (a CUDA graph of the calls too, most likely: the graph-timed blocks of two such baselines
stuck on an H200). When the baseline does not answer a block's "arm" within
``ARM_QUEUE_SECONDS``, the judge writes "go" (the block runs untimed), waits for "done", and
times the case again with blocks of an eighth as many calls (``launch_queue`` in the record); at
one call per block it is an evaluator fault, as before. A candidate that cannot enqueue a block
fails (``timing_check``).

What the judge checks, since the runner is not believed:

* **audits**: right after its end event, in the same stream, the judge reads the outputs of the
  block's last call and of a call drawn from the secret, at ``AUDIT_SAMPLE`` positions of each
  output also drawn from the secret (smaller outputs whole), and compares them with the reference
  on the same inputs; work deferred past "done" leaves them unwritten, and work skipped on a
  fraction ``f`` of the elements escapes one audit with probability ``(1 - f) ** AUDIT_SAMPLE``
  (``f = 1e-4``: 0.14%; a case has 20 or more audits). The inputs of the candidate's audited
  calls must be unchanged, compared whole (the baseline's are judged by its outputs: their
  reference is made from the judge's own copy of its inputs). All of a block's audits are read
  with one wait for the GPU. (The correctness phase compares every element);
* **the baseline was not slowed**: after the last case, the candidate's process is killed (its GPU
  context and any kernel it left running with it) and the baseline is timed again alone with fresh
  measurements of ``o``; interleaved baseline times more than ``INTERFERENCE_LIMIT`` slower than
  these fail the candidate;
* **speed of light**: a per-call time below ``cost.SOL_FRACTION`` of the case's datasheet bound, or
  a block faster than an empty one, is impossible and fails the candidate;
* the judge's wall clock bounds its events.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from aka_core.evaluation import checking, cost, protocol, stats
from aka_core.evaluation.arena import (
    ALIGN,
    CTRL_BYTES,
    OutputReader,
    arena_views,
    map_runner_arena,
    shifted,
    slot_layout,
)
from aka_core.evaluation.failures import (
    BLAMEABLE_PLACEMENTS,
    HELD_BY_CANDIDATE,
    INFRA,
    FailureKind,
    JudgeFailure,
)
from aka_core.evaluation.runner import DONE_OFFSET, GO_OFFSET
from aka_core.evaluation.seeds import derive_seed
from aka_core.evaluation.sides import RAISED, SideFailure
from aka_core.evaluation.steps import Steps, summed_seconds

if TYPE_CHECKING:  # the judge passes itself to measure(); this module never imports it
    from aka_core.evaluation.judge import Judge

ESTIMATE_CALLS = 2
MAX_CALLS = 2000
MEMORY_FRACTION = 0.4
CLEAN_BLOCKS = 4
# The baselines' arenas and graphs set aside for the clean phase take at most this share of the
# GPU's memory (beyond it a case's clean phase gets new ones: ``clean``'s ``placement``).
SET_ASIDE_FRACTION = 0.25
SET_ASIDE_FREE = 0.5  # ... and only while this share of it is free
# A case sent to new memory for lack of free memory is the candidate's doing where the memory its
# processes freed when killed would have made the difference, and was at least this share of
# the GPU (less is within what other processes' start-ups and exits move).
HELD_BY_CANDIDATE_MIN = 0.1
INTERFERENCE_LIMIT = 0.03  # above: not judged (infra_error, retry)
INTERFERENCE_FAIL = 0.10  # above: the candidate fails
COPY_LIMIT = 1.2
ARM_SECONDS = 30.0
ARM_QUEUE_SECONDS = 8.0  # an eager block not enqueued by then: released, and smaller blocks timed
AUDITS_PER_BLOCK = 2  # the last call and one drawn from the secret
AUDIT_SAMPLE = 1 << 16  # elements of each output an audit compares (drawn from the secret)
AUDIT_L2_SLACK = 1.05  # the relative-L2 bound on a sample (an estimate) is this much looser
BLOCK_SECONDS_MIN = 20.0
HELD_UP_SECONDS = 5.0
"""How long a baseline's block that did not finish beside the candidate is given once the
candidate's processes are gone."""
FIT_FROM = 64  # graph blocks of more calls (calls under ~30 us) are sized from graph replays
FIT_CALLS = 128  # graph blocks that time a replayed call before blocks are sized from it
PLACEMENT_GAP = 2 << 20  # at most this many bytes (drawn) before each further placement's slots
# Blocks shrink (both sides alike), to no fewer calls than this share of those ``block_ms`` asks
# for, where that gives room to more of the placements the policy asks for.
PLACED_BLOCK_FLOOR = 0.25


class L2Reader:
    """Reads a buffer twice the L2 size: evicts what the last block left, and dirties nothing."""

    def __init__(self) -> None:
        import torch

        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 * 2**20
        self.buffer = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self.sink = torch.empty((), dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        import torch

        torch.sum(self.buffer, dim=0, out=self.sink)


class SideSlots:
    """One runner's arena of ``count`` input slots (+ control words) and its output views.

    Made in two steps, so that both runners allocate at once (``open_slots``): ``setup`` is sent
    by ``SlotPlan.send``, and the slots are made from the runner's answer."""

    def __init__(self, judge: Judge, plan: SlotPlan, reply: Mapping[str, Any]):
        self.judge, self.side, self.count = judge, plan.side, plan.count
        self.region = plan.region
        self.out_start, self.out_each = plan.size, plan.out_each
        self.total = plan.total
        self.starts = plan.starts
        self.arena = map_runner_arena(judge, plan.side, reply, plan.total)
        self.reader = OutputReader(plan.side)
        if self.out_each:
            self.reader.region = (self.arena.bytes, plan.size, plan.total)
        self.graph = False
        # The candidate's graphs' outputs, per placement, per call.
        self.outputs: list[list[list[Any]]] | None = None
        self.counter = 0

    @property
    def placements(self) -> int:
        return len(self.starts)

    def inputs_of(self, placement: int) -> Any:
        """The bytes of ``placement``'s input slots (where a block on it gets its inputs)."""
        start = self.starts[placement]
        return self.arena.bytes[start: start + self.region * self.count]

    @property
    def go(self) -> int:
        return self.arena.ptr + GO_OFFSET

    @property
    def done(self) -> int:
        return self.arena.ptr + DONE_OFFSET

    def copy_request(self, chosen: list[int]) -> list[list[int]]:
        """Where the baseline copies the outputs of each audited call."""
        return [[j, self.out_start + k * self.out_each] for k, j in enumerate(chosen)]

    def placed_views(self, descs: Any) -> list[list[list[Any]]]:
        """Each placement's graph outputs (a capture's answer), checked like ``views``."""
        if not isinstance(descs, list) or len(descs) != self.placements:
            raise _violation(self.side, f"expected the outputs of {self.placements} placements")
        return [self.views(placed) for placed in descs]

    def views(self, descs: Any) -> list[list[Any]]:
        from aka_core.evaluation import protocol

        if not isinstance(descs, list) or len(descs) != self.count or not all(
                isinstance(call, list) and len(call) <= 64 for call in descs):
            raise _violation(self.side, f"expected the outputs of {self.count} calls")
        try:
            return [[self.reader.view(d) for d in call] for call in descs]
        except protocol.ProtocolError as exc:
            raise _violation(self.side, str(exc)) from None

    def unmap(self) -> None:
        """The judge lets go of the runner's memory (before the runner frees it: ``release``)."""
        self.outputs = None
        self.reader.close()
        self.arena.close()


@attrs.frozen
class SlotPlan:
    """What ``setup`` asks one runner for: ``count`` input slots of ``region`` bytes after the
    control words, once per placement (``gaps``: the bytes before each placement's slots, so
    that no two placements lie alike), and (the baseline's) room for the copies of its audited
    calls' outputs."""

    side: str
    layout: Mapping[str, Any]
    region: int
    count: int
    out_bytes: int
    gaps: tuple[int, ...] = (0,)

    @property
    def starts(self) -> list[int]:
        """Where each placement's first slot lies in the arena."""
        starts, at = [], CTRL_BYTES
        for gap in self.gaps:
            at += gap
            starts.append(at)
            at += self.region * self.count
        return starts

    @property
    def size(self) -> int:
        return CTRL_BYTES + sum(self.gaps) + self.region * self.count * len(self.gaps)

    @property
    def out_each(self) -> int:
        # The baseline copies the outputs of its audited calls (at most AUDITS_PER_BLOCK) here.
        return self.out_bytes if self.side == "baseline" else 0

    @property
    def total(self) -> int:
        return self.size + AUDITS_PER_BLOCK * self.out_each

    def send(self, judge: Judge) -> None:
        slots = [shifted(self.layout, start + j * self.region)
                 for start in self.starts for j in range(self.count)]
        out = [self.size, self.total - self.size] if self.out_each else None
        judge._send(self.side, "setup", "timing", nbytes=self.total, slots=slots, out=out,
                    per_placement=self.count)


def open_slots(judge: Judge, plans: list[SlotPlan]) -> dict[str, SideSlots]:
    """Each plan's slots, its runner's ``setup`` sent to every side before any answer is read
    (the runners allocate and export at once; the answers are read in the plans' order, the
    baseline's first). On a failure, the slots already mapped are let go of."""
    for plan in plans:
        plan.send(judge)
    opened: dict[str, SideSlots] = {}
    try:
        for plan in plans:
            reply = judge._answer(plan.side, "setup", "timing")
            opened[plan.side] = SideSlots(judge, plan, reply)
    except BaseException:
        for slots in opened.values():
            slots.unmap()
        raise
    return opened


def release_slots(judge: Judge, slots: Mapping[str, SideSlots]) -> None:
    """Every side's slots let go of by the judge, then freed by their runners (``release`` sent
    to each live runner before any answer is read). A release that fails is not the case's
    failure: a runner that is gone or broken fails where it is next asked something."""
    for each in slots.values():
        each.unmap()
    sent = []
    for side in slots:
        if judge.runners[side].dead:
            continue
        try:
            judge._send(side, "release", "timing")
            sent.append(side)
        except JudgeFailure:
            pass
    for side in sent:
        try:
            judge._answer(side, "release", "timing")
        except JudgeFailure:
            pass


def _violation(side: str, message: str) -> JudgeFailure:
    if side == "candidate":
        return JudgeFailure(FailureKind.PROTOCOL, f"candidate: {message}")
    return JudgeFailure(INFRA, f"baseline runner: {message}")


class LaunchQueueFull(Exception):
    """A block of ``count`` calls could not be enqueued (released untimed): time smaller ones."""

    def __init__(self, side: str, count: int):
        super().__init__(f"the {side} could not enqueue a block of {count} calls")
        self.side, self.count = side, count


def gpu_memory() -> tuple[int, int]:
    """(free, total) bytes of the GPU, after the judge's allocator gave back what it only
    caches."""
    import torch

    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return int(free), int(total)


class SetAside:
    """Room for the baselines' arenas and graphs kept from each case's pairs until its clean
    phase, so that the baseline is timed alone on the memory it was timed on beside the
    candidate. Where a call's buffers lie matters: on an H100 a new capture alone (its outputs
    elsewhere) moved a baseline's call by up to 7% (``bench/placement_probe.py``), which a clean
    phase on new memory read as the candidate's interference (a false ``infra_error``)."""

    def __init__(self, room: int, free_share: Callable[[], float] = lambda: 1.0):
        self.room, self.used, self.free_share = room, 0, free_share
        self.refused: dict[str, Any] | None = None
        """Why the last ``take`` was refused: ``room`` (the share is spent) or ``free`` (with
        the free share then)."""

    @classmethod
    def on_this_gpu(cls) -> SetAside:
        import torch

        def free_share() -> float:
            free, total = torch.cuda.mem_get_info()
            return free / total

        return cls(int(SET_ASIDE_FRACTION * torch.cuda.mem_get_info()[1]), free_share)

    def take(self, nbytes: int) -> bool:
        """Room for ``nbytes`` more, and half the GPU's memory still free (kept memory is
        memory the next cases cannot have: their slots must not fail for it)."""
        self.refused = None
        if self.used + nbytes > self.room:
            self.refused = {"why": "room"}
            return False
        share = self.free_share()
        if share < SET_ASIDE_FREE:
            self.refused = {"why": "free", "free_share": round(share, 4)}
            return False
        self.used += nbytes
        return True


class CaseTimer:
    refused: dict[str, Any] | None = None
    """Why the baseline's slots were not kept for the clean phase (``keep``)."""

    def __init__(self, judge: Judge, case: Any, index: int, flush: L2Reader,
                 aside: SetAside | None = None, last: bool = False):
        import torch

        self.judge, self.case, self.index, self.flush = judge, case, index, flush
        self.aside, self.last = aside, last
        self.kept: SideSlots | None = None  # the baseline's slots (and graph), kept: ``keep``
        self.policy = judge.req.timing
        self.rng = random.Random(derive_seed(judge.timing_root, "order", case.name))
        self.stream = torch.cuda.Stream()
        self.unblock_stream = torch.cuda.Stream()
        probe = judge.inputs_for(case, derive_seed(judge.timing_root, case.name, "probe"))
        self.layout, self.region = slot_layout(probe, 0)
        self.expected = judge.structures[case.name]
        self.out_bytes = sum(checking.structure_bytes(self.expected))
        self.out_aligned = sum(-(-b // ALIGN) * ALIGN for b in
                               checking.structure_bytes(self.expected)) + ALIGN
        self.slots: dict[str, SideSlots] = {}
        self.record: dict[str, Any] = {"case": case.name, "held_out": case.name in judge.held_out}
        self.stages: dict[str, float] = {}  # the judge's seconds per stage of the case
        self.reset()

    def reset(self) -> None:
        """What a timing of the case accumulates (again from nothing after a released block)."""
        self.windows: dict[str, list[float]] = {"baseline": [], "candidate": []}
        self.pair_placements: list[int] = []  # the placement each pair's blocks ran on
        self.placements, self.placement = 1, 0
        self.touch_windows: list[float] = []
        self.copy_ms: dict[str, list[float]] = {"baseline": [], "candidate": []}
        self.flush_ms: dict[str, list[float]] = {"baseline": [], "candidate": []}
        self.host_check: list[float] = []
        self.block_steps: dict[str, float] = {}
        self.references: dict[int, list[Any]] = {}
        self.positions: list[Any | None] = []
        self.audits = 0
        self.stage: Any = None
        self.stage_views: list[dict[str, Any]] = []
        self.count = ESTIMATE_CALLS
        self.counts = {"baseline": ESTIMATE_CALLS, "candidate": ESTIMATE_CALLS}
        self.drawn: dict[str, int | None] = {}
        self.mode = {"baseline": "eager", "candidate": "eager"}

    # ------------------------------------------------------------------ set-up
    def allocate(self, count: int, baseline: int | None = None, placements: int = 1) -> None:
        """Slots for blocks of ``count`` calls (the candidate's, and the stage's inputs), and of
        ``baseline`` calls (at most ``count``; default as many) for the baseline: each side's
        blocks aim at ``block_ms`` of its own work, so a baseline 10x slower than the candidate
        is not timed on blocks 10x longer (that was most of such a case's GPU time). Each side
        gets ``placements`` sets of them, a drawn gap before each further one."""
        self.release(runners=False)  # each runner's "setup" frees its last slots first
        self.count = count
        self.counts = {"candidate": count, "baseline": min(count, baseline or count)}
        self.placements, self.placement = placements, 0
        self.make_stage()
        draw = random.Random(derive_seed(self.judge.timing_root, "gaps", self.case.name, count))
        self.slots = open_slots(self.judge, [
            SlotPlan(side, self.layout, self.region, self.counts[side], self.out_aligned,
                     (0, *(draw.randrange(PLACEMENT_GAP // ALIGN) * ALIGN
                           for _ in range(placements - 1))))
            for side in ("baseline", "candidate")])

    def free_memory(self) -> int:
        """The GPU's free bytes, after the judge's allocator gave back what it only caches (the
        last slots' stage, inputs and references): room a placement could have."""
        return gpu_memory()[0]

    def placements_that_fit(self, count: int, baseline: int, free: int) -> int:
        """The placements the policy asks for, as many as fit ``MEMORY_FRACTION`` of ``free``
        bytes: both sides' slots and their graphs' outputs (twice them) once per placement."""
        per = ((count + baseline) * (self.region + 2 * self.out_bytes + ALIGN) + PLACEMENT_GAP
               + AUDITS_PER_BLOCK * self.out_aligned)
        fits = int(MEMORY_FRACTION * free // max(per, 1))
        return max(1, min(self.policy.placements, fits))

    def sizes_for_placements(self, count: int, baseline: int, free: int
                             ) -> tuple[int, int, int]:
        """Both sides' calls per block and the placements they leave room for. Where fewer
        placements fit than the policy asks for, both sides' blocks shrink alike, step by step
        down to ``PLACED_BLOCK_FLOOR`` of their calls, to the largest blocks that leave room for
        the most placements: a large memory-bound case (every call on inputs of its own) would
        otherwise be timed on one placement, and its CI would say nothing of the several
        percent its time moves with where its buffers lie."""
        best = (count, baseline, self.placements_that_fit(count, baseline, free))
        scale = 1.0
        while best[2] < self.policy.placements and scale > PLACED_BLOCK_FLOOR:
            scale = max(PLACED_BLOCK_FLOOR, scale * 0.8)
            c = max(2, math.ceil(count * scale))
            b = max(2, min(c, math.ceil(baseline * scale)))
            fits = self.placements_that_fit(c, b, free)
            if fits > best[2]:
                best = (c, b, fits)
        if best[0] != count:
            self.record["placement_sized"] = {"calls_from": count, "calls_to": best[0],
                                              "baseline_from": baseline,
                                              "baseline_to": best[1]}
        return best

    def make_stage(self) -> None:
        """The judge's private copy of a block's inputs, laid out like a runner's slots."""
        import torch

        self.stage = torch.empty(self.region * self.count, dtype=torch.uint8, device="cuda")
        self.stage_views = [arena_views(self.stage, self.layout, j * self.region)
                            for j in range(self.count)]

    def release(self, runners: bool = True) -> None:
        """The slots let go of (by the judge; by their runners too unless ``runners`` is False:
        a runner's next "setup" frees them first, one round trip fewer)."""
        slots, self.slots = self.slots, {}
        if slots:
            if runners:
                release_slots(self.judge, slots)
            else:
                for each in slots.values():
                    each.unmap()
        self.stage = None
        self.stage_views = []

    def fresh_inputs(self, pair: int) -> list[dict[str, Any]]:
        """New inputs for every call of the block, written into the judge's private stage (the
        same for both sides of a pair: their audits share the drawn call and its reference)."""
        self.references = {}
        # The candidate's audited call is drawn from all of its block's calls but its last
        # (audited anyway): a draw among the baseline's shorter block would leave the rest of
        # the candidate's unaudited. The baseline (trusted: its audits only check that nothing
        # disturbed its memory) audits the same call where its block has it, so a pair computes
        # at most three references.
        candidate = self.counts["candidate"]
        drawn = self.rng.randrange(candidate - 1) if candidate > 1 else None
        self.drawn = {"candidate": drawn, "baseline": drawn if drawn is not None
                      and drawn < self.counts["baseline"] - 1 else None}
        self.positions = checking.sample_positions(
            self.expected, derive_seed(self.judge.timing_root, self.case.name, pair, "positions"),
            "cuda", AUDIT_SAMPLE)
        sets = []
        for j in range(self.count):
            inputs = self.judge.inputs_for(self.case, derive_seed(self.judge.timing_root,
                                                                  self.case.name, pair, j))
            for name, view in self.stage_views[j].items():
                view.copy_(inputs[name])
            sets.append({name: self.stage_views[j].get(name, v) for name, v in inputs.items()})
        return sets

    def prime(self, *sides: str, fresh: bool = True) -> None:
        """Valid inputs in every slot of ``sides`` before calls that run at once (a capture's
        warm-up): an arena holds garbage until a block copies inputs into it, and garbage
        indices would make an honest gather read out of bounds. Nothing primed is timed or
        audited, so one set of inputs is made and copied into every slot (the task's inputs
        factory costs several times a call of the kernel: on large cases, making every block's
        inputs is most of the timing phase's GPU time). ``fresh=False``: the stage as it is."""
        import torch

        if fresh:
            self.references = {}
            inputs = self.judge.inputs_for(self.case, derive_seed(self.judge.timing_root,
                                                                  self.case.name, "prime"))
            for views in self.stage_views:
                for name, view in views.items():
                    view.copy_(inputs[name])
        for side in sides:
            slots = self.slots[side]
            for placement in range(slots.placements):
                slots.inputs_of(placement).copy_(self.stage_for(side))
        torch.cuda.synchronize()

    def stage_for(self, side: str) -> Any:
        """The stage's inputs of ``side``'s block: its first ``counts[side]`` calls'."""
        return self.stage[: self.region * self.counts[side]]

    def choose_mode(self) -> None:
        method = self.policy.method
        self.record["method"] = "eager"
        if method == "events":
            return
        self.prime("baseline", "candidate")
        # Both sides capture at once (each in its own process); the baseline's answer decides.
        for side in ("baseline", "candidate"):
            self.judge._send(side, "capture", "timing", count=self.counts[side])
        failed: JudgeFailure | None = None
        try:
            self.judge._answer("baseline", "capture", "timing")
        except JudgeFailure as exc:
            failed = exc
        reply, refused = None, None
        try:
            reply = self.judge.runners["candidate"].answer(
                "capture", self.judge.candidate_seconds(ARM_SECONDS))
        except SideFailure as exc:
            if exc.kind != RAISED:
                raise self.judge.side_failure("candidate", exc, "timing") from None
            refused = exc
        if failed is not None:
            # Once more with the candidate idle: its capture, at the same time, must not be what
            # made the baseline's fail (by the memory it took meanwhile, say).
            try:
                self.judge._request("baseline", "capture", "timing",
                                    count=self.counts["baseline"])
            except JudgeFailure as exc:
                self.record["graph_fallback"] = f"the baseline cannot be captured: {exc}"
                return  # both sides eager (the candidate's graphs go with its slots)
            self.record["baseline_capture_retried"] = str(failed)[:500]
        self.mode["baseline"] = "graph"  # its outputs: copied after each audited block
        self.record["method"] = "cuda_graph"
        if refused is not None:
            self.record["candidate_method"] = "eager"
            self.record["candidate_graph_failure"] = str(refused)[:500]
            return
        assert reply is not None
        candidate = self.slots["candidate"]
        candidate.outputs = candidate.placed_views(reply.get("outputs"))
        self.mode["candidate"] = "graph"

    # ------------------------------------------------------------------ one block
    def block(self, side: str, inputs: list[dict[str, Any]] | None, *, touch: bool = False,
              audit: bool = True) -> float:
        import torch

        from aka_core.evaluation import cuda_ipc

        judge = self.judge
        slots = self.slots[side]
        runner = judge.runners[side]
        other = judge.runners.get("candidate") if side == "baseline" else None
        slots.counter += 1
        n = slots.counter
        clock = Steps(self.block_steps)
        if other is not None and not other.dead:
            # No new GPU work from the candidate (or anything it started) while the baseline is
            # timed.
            other.stop(spare=runner.proc.pid)
            clock("stop_other")
        count = self.counts[side]
        chosen: list[int] = []
        if not touch and audit:
            chosen = [count - 1]
            if self.drawn.get(side) is not None:
                chosen.append(self.drawn[side])
        copy = slots.copy_request(chosen) if slots.out_each else None
        try:
            try:
                if touch:
                    reply = runner.request("touch", ARM_SECONDS if side == "baseline" else
                                           self.judge.candidate_seconds(ARM_SECONDS), n=n)
                else:
                    reply = self.arm(runner, slots, side, n)
            except SideFailure as exc:
                if exc.kind == FailureKind.TIMEOUT and side == "candidate":
                    if self.judge.spent_by_candidate():
                        raise self.judge.phase_spent_failure() from None
                    raise JudgeFailure(FailureKind.TIMING_CHECK, "the candidate did not enqueue its timed "
                                       f"calls within {ARM_SECONDS:.0f} s: a timed call must not "
                                       "wait for the GPU (no .item(), .cpu(), .tolist(), "
                                       "synchronize()), and a block of "
                                       f"{count} calls must fit the GPU's launch queue "
                                       "(the driver's: keep a call's launches "
                                       "few)") from None
                raise judge.side_failure(side, exc, "timing") from None
            clock("arm")
            outputs = slots.outputs[self.placement] if slots.outputs is not None else None
            if not touch and self.mode[side] == "eager" and not slots.out_each:
                outputs = slots.views(reply.get("outputs"))
            wrong = {j: checking.structure_differs(outputs[j], self.expected)
                     for j in chosen} if outputs is not None and not copy else {}
            e0, ef, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
            copies: dict[int, list[Any]] = {}
            started = time.monotonic()
            # The stage was written on the default stream: the block's copy must follow it.
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                e0.record(self.stream)
                if not touch:
                    slots.inputs_of(self.placement).copy_(self.stage_for(side))
                # After the copy: the read evicts the inputs' lines the copy left dirty in L2
                # (written back here, not inside the window) and everything else; the window
                # starts with nothing of the block cached.
                ef.record(self.stream)
                self.flush()
                e1.record(self.stream)
                cuda_ipc.stream_write(self.stream.cuda_stream, slots.go, n)
                cuda_ipc.stream_wait_at_least(self.stream.cuda_stream, slots.done, n)
                e2.record(self.stream)
                if not copy:  # the candidate's outputs, before it can touch them again
                    for j in chosen:
                        assert outputs is not None
                        copies[j] = ([v.clone() for v in outputs[j]] if wrong[j] else
                                     checking.take(outputs[j], self.positions))
            clock("enqueue")
            self._wait(e2, slots.done, n, side)
            clock("wait")
            self.stream.synchronize()
            wall_ms = (time.monotonic() - started) * 1000
            clock("sync")
            if copy:
                copies, wrong = self.baseline_copies(slots, copy, chosen)
                clock("copy_out")
        finally:
            if other is not None:
                other.cont()
                clock("cont_other")
        window = e1.elapsed_time(e2)
        if window > wall_ms * 1.01 + 0.05:
            raise JudgeFailure(INFRA, f"the GPU's events ({window:.3f} ms) exceed the judge's wall "
                               f"clock ({wall_ms:.3f} ms)")
        self.host_check.append(wall_ms - window)
        if not touch:
            self.copy_ms[side].append(e0.elapsed_time(e1))
            self.flush_ms[side].append(ef.elapsed_time(e1))
            # The audited elements were taken on the judge's stream; the audit reads them on this.
            torch.cuda.current_stream().wait_stream(self.stream)
            if copies:
                assert inputs is not None
                self.audit_calls(side, copies, {j: inputs[j] for j in copies}, wrong)
            clock("audit")
        return window

    def baseline_copies(self, slots: SideSlots, copy: list[list[int]], chosen: list[int]
                        ) -> tuple[dict[int, list[Any]], dict[int, str | None]]:
        """The baseline's audited outputs, which it copies into its arena after the block (the
        audited elements of each, and why its outputs have the wrong structure, if they do)."""
        import torch

        try:
            reply = self.judge._request("baseline", "copy_out", "timing", timeout=ARM_SECONDS,
                                        copy=copy)
            copied = reply.get("copies")
            if not isinstance(copied, list) or len(copied) != len(chosen):
                raise protocol.ProtocolError("the copies of the audited outputs are missing")
            copies, wrong = {}, {}
            with torch.cuda.stream(self.stream):
                for j, descs in zip(chosen, copied, strict=True):
                    if not isinstance(descs, list) or len(descs) > 64:
                        raise protocol.ProtocolError("an audited call's outputs are malformed")
                    views = [slots.reader.view(d) for d in descs]
                    wrong[j] = checking.structure_differs(views, self.expected)
                    copies[j] = ([v.clone() for v in views] if wrong[j] else
                                 checking.take(views, self.positions))
            return copies, wrong
        except (protocol.ProtocolError, TypeError) as exc:
            raise _violation("baseline", str(exc)) from None

    def arm(self, runner: Any, slots: SideSlots, side: str, n: int) -> dict[str, Any]:
        """The runner's answer to "arm" (its block enqueued behind "go"), or ``LaunchQueueFull``
        after releasing a block the baseline could not enqueue in ``ARM_QUEUE_SECONDS``."""
        import torch

        from aka_core.evaluation import cuda_ipc

        graph = self.mode[side] == "graph"
        # Only the baseline's blocks are made smaller: a candidate that will not enqueue what the
        # baseline can must not choose the size of the blocks (fewer calls per block weigh the
        # error of the hand-off cost ``o`` more), and fails as before.
        count = self.counts[side]
        quick = side == "baseline" and count > 1
        limit = (ARM_QUEUE_SECONDS if quick else ARM_SECONDS) if side == "baseline" else (
            self.judge.candidate_seconds(ARM_SECONDS))
        try:
            return runner.request("arm", limit, n=n, count=count, graph=graph,
                                  placement=self.placement)
        except SideFailure as exc:
            if not (quick and exc.kind == FailureKind.TIMEOUT):
                raise
        # Its calls may wait for room in the launch queue that only the block, held behind "go",
        # would free: let the block run (untimed) and time blocks of fewer calls.
        cuda_ipc.stream_write(self.unblock_stream.cuda_stream, slots.go, n)
        cuda_ipc.stream_wait_at_least(self.unblock_stream.cuda_stream, slots.done, n)
        released = torch.cuda.Event()
        released.record(self.unblock_stream)
        runner.answer("arm", ARM_SECONDS)
        self._wait(released, slots.done, n, side)
        self.unblock_stream.synchronize()
        raise LaunchQueueFull(side, count)

    def _wait(self, end: Any, word: int, n: int, side: str) -> None:
        """Until ``end`` (an event behind a wait for the runner's ``word``) has passed; a side
        that never writes the word fails, and the judge's stream is released by writing it."""

        # Sized on the baseline's estimate, which the candidate cannot inflate (its own estimate
        # block could make every wait on it minutes long); the candidate's within the phase.
        limit = max(BLOCK_SECONDS_MIN, self.counts.get(side, self.count) * self.baseline_ms * 50
                    / 1000)
        if side == "candidate":
            limit = self.judge.candidate_seconds(limit)
        started = time.monotonic()
        deadline = started + limit
        try:
            while not end.query():
                if time.monotonic() > deadline:
                    self._block_did_not_finish(end, word, n, side, limit)
                time.sleep(0.0002)
        finally:
            runner = self.judge.runners.get(side)
            if runner is not None:
                runner.waited_s += time.monotonic() - started

    def _block_did_not_finish(self, end: Any, word: int, n: int, side: str, limit: float
                              ) -> None:
        """Fail the side whose timed block did not finish, after unblocking the judge's own
        stream. A baseline's block is first given a few seconds more with the candidate's
        processes killed (its kernels die with its context): one that then finishes was held up
        by work the candidate left on the GPU, the candidate's doing, not a fault to retry."""
        from aka_core.evaluation import cuda_ipc, sides

        if side == "baseline" and not self.judge.spent_by_candidate():
            candidate = self.judge.runners.get("candidate")
            if candidate is not None and not candidate.dead:
                candidate.kill()
                sides.kill_orphans_and_wait({self.judge.runners["baseline"].proc.pid})
                until = time.monotonic() + HELD_UP_SECONDS
                while time.monotonic() < until:
                    if end.query():
                        raise JudgeFailure(FailureKind.TIMING_CHECK, f"a timed block of the "
                                           f"baseline did not finish within {limit:.0f} s beside "
                                           "the candidate, and did once the candidate's "
                                           "processes were killed: the candidate kept the GPU "
                                           "busy outside its own blocks")
                    time.sleep(0.001)
        cuda_ipc.stream_write(self.unblock_stream.cuda_stream, word, n)
        self.stream.synchronize()
        if side == "candidate":
            raise JudgeFailure(FailureKind.TIMEOUT, f"a timed block of the candidate did not finish "
                               f"within {limit:.0f} s")
        if self.judge.spent_by_candidate():
            raise self.judge.phase_spent_failure()
        raise JudgeFailure(INFRA, f"a timed block of the baseline did not finish within "
                           f"{limit:.0f} s")

    estimate_ms = 1.0
    baseline_ms = 1.0
    """The baseline's estimated time per call (ms): what the waits on blocks are sized by."""

    def audit(self, side: str, j: int, outs: list[Any], inputs: Mapping[str, Any] | None,
              mismatch: str | None) -> None:
        """One timed call audited (``audit_calls``)."""
        assert inputs is not None
        self.audit_calls(side, {j: outs}, {j: inputs}, {j: mismatch})

    def audit_calls(self, side: str, outs: Mapping[int, list[Any]],
                    inputs: Mapping[int, Mapping[str, Any]], mismatch: Mapping[int, str | None]
                    ) -> None:
        """Compare the audited elements of a block's audited calls' outputs (``outs[j]``: taken
        at the pair's secret positions unless ``mismatch[j]`` says their structure is wrong)
        with the reference's on the same inputs, and the candidate's inputs with the judge's
        copy: one wait for the GPU for all of them when they pass, the detailed comparison only
        where one does not. The baseline's inputs are not compared: its reference is made from
        the judge's own copy of them, so a disturbed input shows in its outputs (a comparison of
        every input byte was most of a large case's audit)."""
        pending: list[tuple[int, list[str], int, int]] = []  # j, inputs compared, flags' span
        flags: list[Any] = []
        quick: dict[int, tuple[int, int]] = {}  # a quick flag's index: (j, output)
        for j, out in outs.items():
            self.audits += 1
            ref = self.reference_of(j, inputs[j])
            start = len(flags)
            names: list[str] = []
            if side == "candidate":
                slot_inputs = self.slot_inputs(side, j)
                names = list(slot_inputs)
                flags += [checking.bytes_differ_flag(slot_inputs[name], self.stage_views[j][name])
                          for name in names]
            if not mismatch.get(j):
                for k, (flag, is_quick) in enumerate(checking.audit_failure_flags(
                        out, ref, self.audit_tolerance())):
                    if is_quick:
                        quick[len(flags)] = (j, k)
                    flags.append(flag)
            pending.append((j, names, start, len(flags)))
        values = checking.read_flags(flags)
        self.settle_quick_flags(values, quick, outs)
        for j, names, start, end in pending:
            read = values[start:end]
            changed = [name for name, differs in zip(names, read, strict=False) if differs]
            problem = mismatch.get(j)
            if problem is None and any(read[len(names):]):
                cmp = checking.compare_outputs(outs[j], self.references[j],
                                               self.audit_tolerance())
                problem = cmp.get("reason") or "it differs from the reference"
                if any(where is not None for where in self.positions):
                    problem += (f" (compared at {AUDIT_SAMPLE} positions of each output drawn "
                                "from the judge's secret)")
            if changed:
                problem = f"it modified its inputs {', '.join(changed)}"
            if problem is None:
                continue
            where = f"case {self.case.name}, call {j + 1} of a timed block of {self.counts[side]}"
            if side == "candidate":
                raise JudgeFailure(FailureKind.TIMING_CHECK,
                                   f"a timed call's output is wrong ({where}): {problem}",
                                   case=self.case.name)
            raise JudgeFailure(INFRA, f"the baseline's timed output was wrong ({where}): "
                               f"{problem}; the baseline passed its checks, so its memory was "
                               "disturbed")

    def settle_quick_flags(self, values: list[bool], quick: Mapping[int, tuple[int, int]],
                           outs: Mapping[int, list[Any]]) -> None:
        """The raised quick flags (``values[i]`` where ``quick[i]`` names the call and output)
        replaced by PyTorch's exact ones: a quick flag says only that an output is not clearly
        within its bounds."""
        from aka_core.evaluation import fused_compare

        raised = [i for i in quick if values[i]]
        if not raised:
            return
        tolerances = self.audit_tolerance()
        exact = []
        for i in raised:
            j, k = quick[i]
            out = outs[j][k]
            exact.append(checking.failure_flag(out, self.references[j][k],
                                               checking.tolerance_for(out.dtype, tolerances)))
        for i, value in zip(raised, checking.read_flags(exact), strict=True):
            values[i] = value
        fused_compare.audits["settled"] += len(raised)

    def reference_of(self, j: int, inputs: Mapping[str, Any]) -> list[Any]:
        """The reference's audited elements for call ``j`` of the pair (made once: both sides'
        audits of the call share it)."""
        ref = self.references.get(j)
        if ref is None:
            full = self.judge.reference_outputs(self.case, inputs)
            shapes = [tuple(t.shape) for t in full]
            if shapes != [shape for shape, _ in self.expected]:  # its dtype may differ
                raise JudgeFailure(FailureKind.TASK_ERROR, f"case {self.case.name}: the reference returned "
                                   f"shapes {shapes} in a timed audit, the baseline "
                                   f"{[shape for shape, _ in self.expected]}")
            ref = self.references[j] = checking.take(full, self.positions)
        return ref

    def audit_tolerance(self) -> Mapping[str, Any]:
        """The task's tolerances; where outputs are sampled, the relative-L2 bound (an estimate
        from the sample) gets ``AUDIT_L2_SLACK``: an honest output near the bound must not fail
        on sampling noise (about 0.5% at 65536 elements). Every sampled element still meets
        atol + rtol * |ref| exactly, and the correctness phase holds the bound on whole outputs."""
        if all(where is None for where in self.positions):
            return self.judge.req.tolerance
        return checking.with_l2_slack(self.judge.req.tolerance, AUDIT_L2_SLACK)

    def slot_inputs(self, side: str, j: int) -> dict[str, Any]:
        slots = self.slots[side]
        return arena_views(slots.arena.bytes, self.layout,
                           slots.starts[self.placement] + j * self.region)

    # ------------------------------------------------------------------ the case
    def run(self) -> dict[str, Any]:
        """The case timed: blocks as large as the policy asks, or, where the baseline could not
        enqueue one, an eighth as large (again from the start)."""
        cap = MAX_CALLS
        while True:
            try:
                return self.run_blocks(cap)
            except LaunchQueueFull as full:
                self.release()
                self.reset()
                self.record.setdefault("launch_queue", []).append(
                    {"side": full.side, "calls_per_block": full.count})
                cap = max(1, full.count // 8)

    def run_blocks(self, cap: int) -> dict[str, Any]:
        """The case timed with blocks of at most ``cap`` calls."""

        judge = self.judge
        stage = Steps(self.stages)
        self.allocate(min(ESTIMATE_CALLS, cap))
        stage("setup")
        inputs = self.fresh_inputs(-1)
        # Warm up: first launches, allocator, caches. Not audited: nothing of these blocks is
        # used, and every timed block after them is (their references were ~1/8 of the case's).
        for side in ("baseline", "candidate"):
            self.block(side, inputs, audit=False)
        touches = [self.block("baseline", None, touch=True) for _ in range(3)]
        o_est = stats.median(touches)
        # One block per side sizes the blocks: an error of it costs precision per block (or GPU
        # time), never bias; microsecond calls' blocks are sized again from graph replays
        # (``fit_graph_blocks``).
        est = {side: max((self.block(side, inputs, audit=False) - o_est) / self.counts[side],
                         1e-4) for side in ("baseline", "candidate")}
        self.estimate_ms = max(est.values())
        self.baseline_ms = est["baseline"]
        free = self.free_memory()
        by_memory = self.calls_that_fit(free)
        # After a block the baseline could not enqueue, both sides' blocks stay within ``cap``
        # (as when they were one size: a candidate like its baseline is not failed for it).
        most = min(cap, MAX_CALLS, by_memory)
        count = int(min(most, max(2, math.ceil(self.policy.block_ms / min(est.values())))))
        # The candidate's blocks sized on the faster side (a candidate cannot make its own
        # blocks shorter), the baseline's on its own estimate: never longer.
        baseline = self.baseline_calls(est["baseline"], count)
        count, baseline, placements = self.sizes_for_placements(count, baseline, free)
        stage("estimate")
        self.allocate(count, baseline, placements)
        stage("setup")
        self.choose_mode()
        stage("capture")
        count = self.fit_graph_blocks(count, most, o_est)
        stage("fit")
        self.record.update(calls_per_block=count, estimate_ms=est,
                           baseline_calls_per_block=self.counts["baseline"],
                           placements=self.placements)
        started = time.monotonic()
        stop_reason = "max_pairs"
        pair = 0
        rounds = self.placements
        order_of_round: list[int] = []
        while pair < self.policy.max_pairs:
            # Rounds: every placement once per round, in an order drawn from the secret.
            if pair % rounds == 0:
                order_of_round = list(range(rounds))
                self.rng.shuffle(order_of_round)
            self.placement = order_of_round[pair % rounds]
            self.pair_placements.append(self.placement)
            inputs = self.fresh_inputs(pair)
            order = ["baseline", "candidate"]
            if self.rng.random() < 0.5:
                order.reverse()
            for side in order:
                self.windows[side].append(self.block(side, inputs))
            if pair % 5 == 4:
                self.touch_windows.append(self.block("baseline", None, touch=True))
            pair += 1
            if judge.remaining() < 0.25 * judge.limit and pair >= 5:
                stop_reason = "phase_limit"  # leave time for the other cases and the clean phase
                break
            # Checked after every pair (every round) from min_pairs (two rounds) on: the CI
            # leaves out one pair at each end from 9 pairs, two from 12 (stats.median_ci_rank),
            # so one stray pair among the first five costs four more pairs, not ten. With
            # several placements, what pairs can narrow is their spread within placements; the
            # spread between placements is the CI's, as measured.
            if (pair >= self.policy.min_pairs and pair % rounds == 0
                    and (rounds == 1 or pair >= 2 * rounds)):
                b, c = self.samples(o_est)
                if (stats.within_ci_halfwidth(b, c, self.pair_placements) * 100
                        <= self.policy.target_ci_percent):
                    stop_reason = "ci_target"
                    break
                if time.monotonic() - started > self.policy.max_seconds_per_case:
                    stop_reason = "time_cap"
                    break
        self.placement = 0
        self.record.update(pairs=pair, stop_reason=stop_reason, audits=self.audits,
                           pair_placements=self.pair_placements,
                           audit_sample_elements=AUDIT_SAMPLE,
                           seconds=round(time.monotonic() - started, 3),
                           windows_ms=self.windows, overhead_interleaved_ms=o_est,
                           touch_windows_ms=self.touch_windows,
                           input_copy_ms={side: stats.median(v) for side, v in self.copy_ms.items()
                                          if v})
        stage("pairs")
        if judge.req.time_reference:
            self.record["reference_ms"] = time_alone(judge.reference,
                                                     judge.inputs_for(self.case, 1), self.flush)
        self.keep()
        self.release()
        stage("keep_release")
        return self.record

    def keep(self) -> None:
        """The baseline's arena and graph set aside for the clean phase (``SetAside``), where
        there is room: its runner keeps them, the judge keeps its mapping of them."""
        baseline = self.slots.get("baseline")
        if baseline is None or self.aside is None:
            return
        graph_bytes = self.graph_bytes("baseline")
        # The last case's is always kept: no case after it needs the memory, and the clean
        # phase comes after the candidate's memory is freed (so a candidate holding most of the
        # GPU cannot send every case's clean phase to new memory).
        if self.last:
            # Counted, not limited: the memory held when the candidate is killed must be told
            # apart from what it held (``held_by_candidate``).
            self.aside.used += baseline.total + graph_bytes
        elif not self.aside.take(baseline.total + graph_bytes):
            self.refused = dict(self.aside.refused or {})
            if self.refused.get("why") == "free":
                # What is known to hold memory now besides the candidate's own: both sides'
                # slots and graphs of this case, the kept arenas, the judge's allocator.
                candidate = self.slots.get("candidate")
                known = baseline.total + graph_bytes + (
                    candidate.total + self.graph_bytes("candidate") if candidate else 0)
                self.refused.update(known_bytes=known, kept_bytes=self.aside.used,
                                    **self.memory_snapshot())
            return
        self.judge._request("baseline", "keep", "timing", key=str(self.index))
        self.kept = baseline
        del self.slots["baseline"]

    def graph_bytes(self, side: str) -> int:
        """What ``side``'s graphs hold: each placement's pool holds its calls' outputs (and what
        they allocate besides: twice that); nothing where the side runs eager."""
        slots = self.slots.get(side)
        if slots is None or self.mode.get(side) != "graph":
            return 0
        return self.counts[side] * 2 * self.out_bytes * slots.placements

    @staticmethod
    def memory_snapshot() -> dict[str, int]:
        """The GPU's free bytes and the judge's own allocator's reserved bytes, now."""
        import torch

        free, _ = gpu_memory()
        return {"free_bytes": free, "judge_reserved_bytes": int(torch.cuda.memory_reserved())}

    def calls_that_fit(self, free: int) -> int:
        """Calls whose slots fit ``MEMORY_FRACTION`` of ``free`` bytes. None fitting, with the
        candidate's process alive, is judged as any out-of-memory error then is
        (``Judge.memory_failure``): the candidate's where the GPU had room when the evaluation
        began, so that holding memory cannot turn a timing into a retry."""
        per_call = 3 * (self.region + ALIGN) + 3 * self.out_bytes
        fits = int(MEMORY_FRACTION * free // max(per_call, 1))
        if fits < 1:
            short = MemoryError(f"out of memory: {free / 2**20:.0f} MiB free, {per_call / 2**20:.0f} "
                                f"MiB needed to time case {self.case.name}")
            raise self.judge.memory_failure(short) or JudgeFailure(INFRA, str(short))
        return fits

    def baseline_calls(self, per_call_ms: float, count: int) -> int:
        """Calls in the baseline's blocks: ``block_ms`` of its own work, at most ``count`` (all
        ``count`` where the task's ``timing.baseline_blocks`` is ``shared``)."""
        if self.policy.baseline_blocks == "shared":
            return count
        return int(min(count, max(2, math.ceil(self.policy.block_ms / per_call_ms))))

    def fit_graph_blocks(self, count: int, most: int, overhead: float) -> int:
        """Blocks sized again once both sides are replayed as graphs. The eager estimates of a
        microsecond call are noise: two calls queued behind "go" run in a few microseconds, the
        hand-off around them varies by as much, and the count drawn from them landed anywhere
        from 400 to the 2000-call cap for the same task on an H200 (a graph of 2000 calls of two
        kernels each then could not be enqueued behind "go"). So, where the estimate gave more
        than ``FIT_FROM`` calls: both sides captured at ``FIT_CALLS`` calls at most, two
        unaudited replays each time a call, and the blocks sized from that to aim at
        ``block_ms`` (recaptured unless within 25%): the candidate's (and the stage's) on the
        faster side's call, the baseline's on its own (``baseline_to``). A side that cannot
        replay the new blocks keeps the sizes it could."""
        if (self.mode["baseline"] != "graph" or self.mode["candidate"] != "graph"
                or count <= FIT_FROM):
            return count
        first, first_baseline = count, self.counts["baseline"]
        if count > FIT_CALLS:
            count = FIT_CALLS
            if self.capture_at(count, min(count, first_baseline)) != count:  # as at first
                self.capture_at(first, first_baseline)
                return first
        baseline = self.counts["baseline"]
        inputs = self.fresh_inputs(-3)
        per_call = {side: max((stats.median([self.block(side, inputs, audit=False)
                                             for _ in range(2)]) - overhead)
                              / self.counts[side], 1e-5) for side in ("baseline", "candidate")}
        fastest = min(per_call.values())
        wanted = int(min(most, MAX_CALLS, max(2, math.ceil(self.policy.block_ms / fastest))))
        wanted_baseline = self.baseline_calls(per_call["baseline"], wanted)
        resized = {"from": first, "to": wanted, "replayed_call_ms": round(fastest, 6),
                   "baseline_to": wanted_baseline}
        self.record["graph_resized"] = resized
        if (abs(wanted - count) <= 0.25 * count
                and abs(wanted_baseline - baseline) <= 0.25 * baseline):
            resized["to"], resized["baseline_to"] = count, baseline  # near the aim: as they are
            return count
        if self.capture_at(wanted, wanted_baseline) == wanted:
            return wanted
        resized["kept"] = count
        self.capture_at(count, baseline)
        return count

    def capture_at(self, size: int, baseline: int | None = None) -> int:
        """Slots for ``size`` calls (the baseline's: ``baseline``) and both sides captured again;
        ``size`` if both replay it as a graph, else -1 (the modes are then what the capture
        allowed)."""
        free = self.free_memory() + sum(s.total for s in self.slots.values())
        self.allocate(size, baseline, self.placements_that_fit(
            size, min(size, baseline or size), free))
        self.mode = {"baseline": "eager", "candidate": "eager"}
        for key in ("method", "graph_fallback", "candidate_method", "candidate_graph_failure",
                    "baseline_capture_retried"):
            self.record.pop(key, None)
        self.choose_mode()
        return size if self.mode["baseline"] == self.mode["candidate"] == "graph" else -1

    def samples(self, overhead: float) -> tuple[list[float], list[float]]:
        """Per-call times of the interleaved blocks, each side's over its own block's calls."""
        baseline, candidate = (
            [max(w - overhead, 1e-6) / self.counts[side] for w in self.windows[side]]
            for side in ("baseline", "candidate"))
        return baseline, candidate

    def copies_for_the_candidates_block(self) -> dict[str, float]:
        """Median ms of the input copy and flush before each side's blocks, the baseline's
        scaled to the candidate's block (its copy per call times the candidate's calls, plus its
        flush): what ``check_interference`` compares when the sides' blocks differ in size."""
        copies = {side: stats.median(v) for side, v in self.copy_ms.items() if v}
        if "baseline" in copies and self.flush_ms["baseline"]:
            flush = stats.median(self.flush_ms["baseline"])
            per_call = max(copies["baseline"] - flush, 0.0) / self.counts["baseline"]
            copies["baseline"] = flush + per_call * self.counts["candidate"]
        return copies

    # ------------------------------------------------------------------ the clean phase
    def clean(self) -> dict[str, Any]:
        """The baseline alone (the candidate's process is gone): its time and ``o``, on the
        memory and graph of its blocks beside the candidate where they were kept (``keep``),
        its blocks in turn on each placement its pairs ran on."""
        stage = Steps(self.stages)
        kept, self.kept = self.kept, None
        if kept is not None:
            self.judge._request("baseline", "restore", "timing", key=str(self.index))
            self.slots = {"baseline": kept}
        else:
            self.slots = open_slots(self.judge, [SlotPlan(
                "baseline", self.layout, self.region, self.counts["baseline"], self.out_aligned)])
        placements = self.slots["baseline"].placements
        self.count = self.counts["baseline"]  # the stage: the baseline's calls only
        self.make_stage()
        # One set of fresh inputs for every clean block: the baseline is trusted code (it keeps
        # nothing between calls) and every window starts with L2 flushed, so the same inputs
        # again time as new ones would; making them anew was most of this phase's GPU time.
        inputs = self.fresh_inputs(10_000)
        if kept is None and self.mode["baseline"] == "graph":
            self.prime("baseline", fresh=False)
            self.judge._request("baseline", "capture", "timing", count=self.counts["baseline"])
        stage("clean_setup")
        windows, touches, where = [], [], []
        for block in range(max(CLEAN_BLOCKS, placements)):
            self.placement = block % placements
            where.append(self.placement)
            touches.append(self.block("baseline", None, touch=True))
            windows.append(self.block("baseline", inputs, audit=block == 0))
        touches.append(self.block("baseline", None, touch=True))
        stage("clean_blocks")
        self.placement = 0
        self.release()
        stage("clean_release")
        record = {"windows_ms": windows, "touch_windows_ms": touches,
                  "placement": "same" if kept is not None else "new", "placements": where}
        if kept is None and self.refused is not None:
            record["set_aside_refused"] = self.refused
        return record


def time_alone(fn: Any, inputs: Mapping[str, Any], flush: L2Reader, calls: int = 10) -> float:
    """Median event time of the (trusted) reference in the judge's own process."""
    import torch

    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(**inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return stats.median(times)


def between_runs(judge: Judge) -> float:
    """The task's ``timing.between_runs_percent`` as a standard deviation in logs."""
    return math.log1p(judge.req.timing.between_runs_percent / 100)


def measure(judge: Judge) -> None:
    from aka_core.evaluation import fused_compare, gpu_state, sides

    own: dict[str, float] = {}  # the phase's seconds outside its cases' stages
    stage = Steps(own)
    flush = L2Reader()
    cases_out: list[dict[str, Any]] = []
    perf: dict[str, Any] = {"measured": False, "cases": cases_out}
    judge.result["performance"] = perf
    states = {"start": gpu_state.Reading()}  # read while the first case runs: clocks at work
    perf["flush"] = (f"a read of {flush.buffer.numel() * 4 / 2**20:.0f} MiB (twice the L2) after "
                     "each block's inputs are copied, before its window: L2 clean, nothing of "
                     "the block cached")
    perf["gpu_lock_wait_s"] = judge.result["phases"].get("gpu_wait")
    if judge.holding is not None:
        perf["holder_cpus"] = judge.holding.record()
    timers = []
    aside = SetAside.on_this_gpu()
    # The audits' flag kernel checked on this GPU (a few launches, one wait): PyTorch's flags
    # wherever it is wrong or fails.
    fused_compare.check_audit_flag()
    stage("start")
    for index, case in enumerate(judge.cases):
        timer = CaseTimer(judge, case, index, flush, aside, last=index == len(judge.cases) - 1)
        stage("case_init")
        cases_out.append(timer.run())
        timers.append(timer)
        stage.skip()  # the case's own stages count it
    states["pairs_end"] = gpu_state.Reading()  # the longest load: a slowdown shows here first
    stage("gpu_state")
    # The clean phase: the candidate's process and everything it started are killed, so no
    # kernel of it can still run; then the baseline alone.
    free_before, total = gpu_memory()
    stage("kill_memory")
    judge.runners["candidate"].kill()
    stage("kill")
    # Waited for until gone: a child of the candidate still exiting (its memory not yet freed)
    # would otherwise share the clean phase, or fail its inputs for lack of memory.
    sides.kill_orphans_and_wait({judge.runners["baseline"].proc.pid})
    stage("kill_orphans")
    after = {**CaseTimer.memory_snapshot(), "kept_bytes": aside.used, "gpu_bytes": total}
    # What its processes held at the end: the memory their deaths gave back (the judge's own
    # is unchanged in between, and each runner's is private to it).
    perf["candidate_memory"] = {"freed_when_killed_bytes": max(0, after["free_bytes"]
                                                               - free_before),
                                "gpu_bytes": total}
    stage("kill_memory")
    states["end"] = gpu_state.Reading()  # while the clean phase runs
    stage("gpu_state")
    try:
        finish_cases(judge, timers, cases_out, after)
    finally:  # also when a case's check ends the evaluation: a retry's reader wants the clocks
        stage.skip()  # the clean phase's stages count it
        perf["gpu_state"] = {when: reading.result() for when, reading in states.items()}
        stage("gpu_state")
    speedup, lo, hi = stats.geomean_speedup_ci(
        [(c["samples_ms"]["baseline"], c["samples_ms"]["candidate"], c.get("pair_placements"))
         for c in cases_out], between_runs=between_runs(judge))
    perf.update(
        measured=True, speedup=speedup, ci95=[lo, hi], between_runs=between_runs(judge),
        method=sorted({c["method"] for c in cases_out}),
        description=("judge-timed blocks of calls on fresh inputs (L2 read-flushed before each), "
                     "baseline and candidate interleaved in secret order, the fixed cost of a "
                     "block (measured with the baseline alone) subtracted; per case the median of "
                     "per-pair ratios, geometric mean over cases, percentile bootstrap 95% CI"))
    perf["judge_block_steps_s"] = summed_seconds(t.block_steps for t in timers)
    stage("summary")
    perf["judge_stages_s"] = summed_seconds([*(t.stages for t in timers), own])
    judge.result["wall_clock_check"] = {
        "passed": True, "blocks": sum(len(t.host_check) for t in timers),
        "note": "every block's event time is within the judge's own wall-clock time of it"}


def held_by_candidate(refused: Mapping[str, Any], after: Mapping[str, int] | None
                      ) -> float:
    """The share of the GPU the candidate's processes held when a case's baseline could not be
    kept for lack of free memory (``refused``: ``CaseTimer.keep``'s reading then): what is free
    once they are killed (``after``) and was not then, less what the judge knows held it (both
    sides' slots and graphs of that case, the judge's own allocator; arenas kept since count
    back). Memory it gave back before it was killed counts too: it held it when it mattered."""
    if not after or refused.get("why") != "free" or "free_bytes" not in refused:
        return 0.0
    held = (after["free_bytes"] - refused["free_bytes"] - refused["known_bytes"]
            - (refused["judge_reserved_bytes"] - after["judge_reserved_bytes"])
            + (after["kept_bytes"] - refused["kept_bytes"]))
    return max(0.0, held / after["gpu_bytes"]) if after.get("gpu_bytes") else 0.0


def finish_cases(judge: Judge, timers: list[CaseTimer], records: list[dict[str, Any]],
                 after: Mapping[str, int] | None = None) -> None:
    """Each case's clean phase and checks, in order. An interference reading too small to blame
    against new memory (where placement alone moves a call) waits for the other cases: one read
    alone on its own memory, or any verdict, says more, and the reward service's blame for a
    repeated reading needs it (``check_interference``). New memory that the candidate's own
    holding forced on a case (``held_by_candidate``: without it half the GPU would have been
    free) counts as the case's own memory: holding memory must not turn a slowdown it caused
    into a reading nobody can blame. ``after``: the memory once the candidate was killed."""
    unsure: JudgeFailure | None = None
    for timer, record in zip(timers, records, strict=True):
        record["clean"] = clean = timer.clean()
        refused = clean.get("set_aside_refused") or {}
        held = held_by_candidate(refused, after)
        if held:
            clean["held_by_candidate_share"] = round(held, 4)
        if (clean["placement"] == "new" and held >= HELD_BY_CANDIDATE_MIN
                and refused.get("free_share", 1.0) + held >= SET_ASIDE_FREE):
            clean["placement"] = HELD_BY_CANDIDATE
        finished = Steps(timer.stages)
        try:
            finish_case(judge, timer, record)
            finished("finish")
        except JudgeFailure as exc:
            if (exc.details.get("cause") != "interference_band" or unsure is not None
                    or exc.details.get("placement") in BLAMEABLE_PLACEMENTS):
                raise
            unsure = exc
    if unsure is not None:
        raise unsure


def finish_case(judge: Judge, timer: CaseTimer, record: dict[str, Any]) -> None:
    clean = record["clean"]
    overhead = stats.median(clean["touch_windows_ms"])
    count = timer.counts["candidate"]
    record["overhead_ms"] = overhead
    fastest = min(timer.windows["candidate"])
    if fastest <= overhead * 0.9:
        raise JudgeFailure(FailureKind.IMPOSSIBLE_TIME, f"case {timer.case.name}: a timed block of {count} "
                           f"calls took {fastest:.4f} ms, less than an empty block "
                           f"({overhead:.4f} ms): the work escaped the judge's window")
    baseline, candidate = timer.samples(overhead)
    alone = [max(w - overhead, 1e-6) / timer.counts["baseline"] for w in clean["windows_ms"]]
    clean_baseline = stats.median(alone)
    interleaved_baseline = stats.median(baseline)
    ratio = interleaved_baseline / clean_baseline
    by_placement = None
    if clean.get("placement") == "same" and len(set(timer.pair_placements)) > 1:
        # Each placement against itself (they differ by percents), then their geometric mean.
        beside = stats.by_placement(baseline, timer.pair_placements)
        alone_by = stats.by_placement(alone, clean["placements"])
        if len(beside) == len(alone_by):
            by_placement = [stats.median(b) / stats.median(a)
                            for b, a in zip(beside, alone_by, strict=True)]
            ratio = math.exp(sum(math.log(r) for r in by_placement) / len(by_placement))
    copies = timer.copies_for_the_candidates_block()
    record["interference"] = {"clean_baseline_ms": clean_baseline,
                              "interleaved_baseline_ms": interleaved_baseline,
                              "ratio": ratio, "by_placement": by_placement,
                              "limit": 1 + INTERFERENCE_LIMIT,
                              "input_copy_ms": copies}
    if judge.req.candidate is not None:
        check_interference(timer.case.name, ratio, interleaved_baseline, clean_baseline, copies,
                           placement=clean.get("placement", "new"))
    s, lo, hi = stats.placed_speedup(baseline, candidate, timer.pair_placements,
                                     between_runs=between_runs(judge))
    record.update(samples_ms={"baseline": baseline, "candidate": candidate}, speedup=s,
                  ci95=[lo, hi], baseline_median_ms=stats.median(baseline),
                  candidate_median_ms=stats.median(candidate),
                  ratio_of_medians=stats.median(baseline) / stats.median(candidate))
    sol = speed_of_light(judge, timer.case)
    if sol is not None:
        record["speed_of_light_ms"] = sol
        floor = sol * cost.SOL_FRACTION
        if stats.median(baseline) < floor:
            raise JudgeFailure(FailureKind.TASK_ERROR, f"case {timer.case.name}: the baseline measured "
                               f"{stats.median(baseline):.5f} ms per call, below the task's "
                               f"speed-of-light bound ({sol:.5f} ms): its cost is declared wrong")
        if judge.req.candidate is not None and stats.median(candidate) < floor:
            raise JudgeFailure(FailureKind.IMPOSSIBLE_TIME, f"case {timer.case.name}: the candidate measured "
                               f"{stats.median(candidate):.5f} ms per call, below the speed of "
                               f"light of this GPU for the declared work ({sol:.5f} ms)")


def check_interference(case: str, ratio: float, interleaved: float, clean: float,
                       copies: Mapping[str, float], placement: str = "new") -> None:
    """The candidate's process must not use the GPU outside its own blocks.

    Two signs: the baseline ran slower while the candidate's process was alive than alone after
    it was killed; the judge's copy of a block's inputs and the flush after it (the same work for
    both sides) took longer before the candidate's blocks, i.e. its process held the GPU while
    its inputs were being written (a head start on work that would then escape the window). A small excess may
    be drift between the phases: the evaluation is then not judged (``infra_error``, retry); a
    large one fails the candidate. The retry says why (``cause``) and whether the baseline was
    timed alone on the memory of its pairs (``placement``): drift does not repeat, so the
    reward service blames a candidate that reads the same on that memory in every attempt
    (``aka_core.service.outcome``), where a retry would otherwise spare it every penalty.
    """
    base_copy, cand_copy = copies.get("baseline"), copies.get("candidate")
    if base_copy and cand_copy and cand_copy > base_copy * COPY_LIMIT + 0.02:
        raise JudgeFailure(FailureKind.INTERFERENCE, f"case {case}: copying a block's inputs "
                           "(and the flush after) took "
                           f"{cand_copy:.4f} ms before the candidate's blocks but {base_copy:.4f} "
                           "ms before the baseline's: the candidate's process held the GPU while "
                           "its inputs were written")
    if ratio <= 1 + INTERFERENCE_LIMIT:
        return
    text = (f"case {case}: the baseline ran {(ratio - 1) * 100:.1f}% slower while the candidate's "
            f"process was alive ({interleaved:.4f} ms) than alone after it was stopped "
            f"({clean:.4f} ms)")
    if placement == HELD_BY_CANDIDATE:
        text += (", alone on new memory: the candidate's processes held the GPU memory the "
                 "baseline's own would have been kept in (hold less than half the GPU's memory)")
    if ratio <= 1 + INTERFERENCE_FAIL:
        raise JudgeFailure(INFRA, text + ": too much to trust the timing, too little to blame the "
                           "candidate; retry", cause="interference_band", placement=placement,
                           case=case)
    raise JudgeFailure(FailureKind.INTERFERENCE, text + ": the candidate's process used the GPU outside its "
                       "own blocks")


def speed_of_light(judge: Judge, case: Any) -> float | None:
    model = judge.gpu_model
    declared = judge.req.cost
    if model is None or declared is None:
        return None
    try:
        return cost.speed_of_light_ms(declared.bytes, declared.flops, dict(case.params),
                                      model.memory_bandwidth, model.peak_flops)
    except cost.CostError as exc:
        raise JudgeFailure(FailureKind.TASK_ERROR, f"the task's cost does not evaluate for case "
                           f"{case.name}: {exc}") from None

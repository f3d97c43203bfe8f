#!/usr/bin/env bash
# What the GPU still has to prove, in steps that each fit one GPU run of at most 10 minutes, most
# important first. Run on the device machine from the repository root, with .whl (and .whl-old,
# .old-tree for step 6's latency comparison) carried:
#   bash bench/device_steps.sh 1     # red team, first half
#   bash bench/device_steps.sh 2     # red team, second half
#   bash bench/device_steps.sh 3 [TASK...]  # the reward service: evaluations per GPU-minute, warm p50
#   bash bench/device_steps.sh 4     # A/A and 2x work on every GPU task (issue 12)
#   bash bench/device_steps.sh 5     # aka against ncu on every stored solution (issue 12)
#   bash bench/device_steps.sh 6     # latency: old engine, now, now with 2 ms blocks; A/A and 2x
#                                    # work at 4 and at 2 ms blocks (the default is chosen by it)
#   bash bench/device_steps.sh 8     # latency on the old engine's exact cases (gelu's one fixed
#                                    # held-out case instead of two drawn); a short service run
#   bash bench/device_steps.sh 9     # every task: validate --run and its stored solution (the
#                                    # tasks written on the CPU get their first GPU run here)
#   bash bench/device_steps.sh 10    # aka against ncu and three in-process event timings on the
#                                    # tasks where aka and ncu disagreed (issue 12's diagnosis)
#   bash bench/device_steps.sh 11 TASK...  # validate --run and the stored solution of these tasks
#   bash bench/device_steps.sh 12 TASK...  # step 11 on these tasks (the ones whose baselines overflowed
#                                    # the launch queue), then the GPU red team's newest exploits
#   bash bench/device_steps.sh 13    # the launch-queue tasks and exploit again, then the first e2e
#                                    # task's solution and A/A (E2E_TASKS, E2E_DEADLINE_S)
#   bash bench/device_steps.sh 14 [TASK...]  # e2e tasks: A/A, stored solution, mutants (E2E_SECTIONS)
#   bash bench/device_steps.sh 15    # issues 12 and 13 in one call: the launch-queue tasks and the
#                                    # red team's stall_large_blocks, then the reward service on the
#                                    # 16 GPU tasks with each evaluation's phases (then step 4)
#   bash bench/device_steps.sh 16    # moe_grouped_gemm's sync-free baseline, the rewritten
#                                    # stall_large_blocks, then 2x work on every GPU task (issue 12)
#   bash bench/device_steps.sh 17    # the reward service on the 16 GPU tasks, each evaluation's
#                                    # phases and GPU-exclusive steps (issue 13; no serial pass)
#   bash bench/device_steps.sh 18    # the cases where 2x work read outside 0.50 +- 1% (step 16),
#                                    # and two that did not, timed in one process without the judge
#   bash bench/device_steps.sh 19    # the Triton compile-ahead probe, step 18, then every GPU task on its smoke shape (microsecond
#                                    # calls, graph replay): A/A and 2x work (issue 12's tiny cases)
#   bash bench/device_steps.sh 20    # issue 13's first timing trade: A/A and 2x work with at least
#                                    # 5 pairs per case against the default 10, side by side
#   bash bench/device_steps.sh 21    # the 2x probe on smoke shapes, graph blocks sized from replays,
#                                    # then A/A and 2x work with at least 5 pairs
#   bash bench/device_steps.sh 22    # the reward service as it is now, the smoke shapes' 2x with the
#                                    # flush after the copy, A/A and 2x on three tasks
#   bash bench/device_steps.sh 23    # the reward service with 4 slots per GPU (short)
#   bash bench/device_steps.sh 24    # the compile-ahead probe, smoke shapes with graph blocks sized
#                                    # from replays, the service at 2 and 4 slots
#   bash bench/device_steps.sh 25    # where an evaluation's GPU-exclusive seconds go now: the judge
#                                    # profiled on three service tasks, then the service at 4 slots
#                                    # with single requests and `aka eval --service` (issue 13)
#   bash bench/device_steps.sh 26    # the baseline's blocks on its own work against the candidate's
#                                    # size (A/B in one call), then the service again (issue 13)
#   bash bench/device_steps.sh 27    # what 12-03g left unmeasured: the red team's exploits against
#                                    # the per-side blocks and the audits, the quick comparison on
#                                    # the GPU, then the service with the last scheduler (issue 13)
#   bash bench/device_steps.sh 28    # the service with exact-rank CIs checked after every pair,
#                                    # then A/A and 2x work on eight tasks (issues 13 and 12)
#   bash bench/device_steps.sh 29    # the judge profiled, the service with the lock let go before
#                                    # the baseline's teardown and both sides' slots set up at
#                                    # once, the exploits that leave work behind (issue 13)
#   bash bench/device_steps.sh 30    # A/A and 2x work with the exact-rank stop rule, the smoke
#                                    # shapes' A/A and 2x (issue 12)
#   bash bench/device_steps.sh 31    # the whole GPU red team in one call (steps 1 and 2 together:
#                                    # 55 exploits took 365 s of evaluation on 2026-12-02)
#   bash bench/device_steps.sh 32    # the 28 exploits step 31 did not reach on 2026-12-06 (H100)
#   bash bench/device_steps.sh 33    # issue 13 as an A/B on whatever GPU comes: the service on the
#                                    # engine of 12-04b's last run (798cb76, .whl-old: OLD=798cb76
#                                    # bash bench/build_device_wheels.sh) and on this tree
#   bash bench/device_steps.sh 34    # the judge and the process around it profiled (step 29's
#                                    # profile), then a service job as a single request meets it
#   bash bench/device_steps.sh 35    # grab_gpu_memory (the OOM blame test), the two exploits of
#                                    # the quick pass's new paths, then step 32's list
#   bash bench/device_steps.sh 36    # the quick pass on float64 references, grab_gpu_memory, the
#                                    # service on 16 tasks x 2 (a short call)
#   bash bench/device_steps.sh 37    # issue 13's table in one call: serial `aka eval` of the 16
#                                    # (reference scores, warm kernel store), single requests,
#                                    # the service on 16 x 3; then the red team while time is left
#   bash bench/device_steps.sh 38    # on an H200, step 37's service part (issue 13's table); on
#                                    # any other GPU, the red team's exploits step 37 did not
#                                    # reach, then the spread between serial evaluations of one
#                                    # candidate, whole records kept (what moves between them)
#   bash bench/device_steps.sh 39    # does a call's time depend on where its buffers landed?
#                                    # (bench/placement_probe.py on the cases step 38 saw move);
#                                    # on an H200, then step 37's service part (issue 13's table)
#   bash bench/device_steps.sh 40    # the placement probe again, with each input set behind a
#                                    # spacer of its own (do a block's calls then average?)
#   bash bench/device_steps.sh 41    # on an H200: the placement probe (is the H100's placement
#                                    # effect there?), then issue 13's table (step 37's service
#                                    # part); on an H100: A/A three times on the three tasks whose
#                                    # baselines moved with placement (what it does to a score)
#   bash bench/device_steps.sh 42    # the clean phase on the baseline's own memory (kept from its
#                                    # pairs): step 41's A/A again (false interference gone?), then
#                                    # the service (on an H200 with the serial scores: issue 13)
#   bash bench/device_steps.sh 43    # placements (pairs rotate over 3 per side): step 41's A/A,
#                                    # the timing exploits, issue 13's table with serial scores
#   bash bench/device_steps.sh 44    # issue 13's table alone (serial scores, service, singles)
#   bash bench/device_steps.sh 50    # where the GPU-exclusive seconds go, stage by stage: the
#                                    # service once over the 16 tasks, the judge profiled on four
#   bash bench/device_steps.sh 51    # A/B: audits read later and captures at once against the
#                                    # judge before them (service, stages), then audit exploits
#   bash bench/device_steps.sh 52    # captures at once: issue 13's rate and latencies (service
#                                    # with stages, singles; no serial pass)
#   bash bench/device_steps.sh 53    # step 52's rate from a warm kernel store (--warm-pass)
# Steps 1 and 2 ran on 2026-12-01 (bench/results/h200-2026-12-01d/); 10, 11 and 3 on 2026-12-02
# (bench/results/h200-2026-12-02b/); 14 on every e2e task on 2026-12-03
# (bench/results/h200-2026-12-03b/); 15, 16 and 17 on 2026-12-03 (bench/results/h200-2026-12-03c/).
# 19, 21, 22 and 23 on 2026-12-03 (bench/results/h200-2026-12-03d/); 24, 25 and 26 on 2026-12-03
# (bench/results/h200-2026-12-03e, -03f, -03g); 27 and 28 on 2026-12-04 (bench/results/h200-2026-12-04, -04b).
# Run each as one device call through bench/device_call.sh (a time limit of its own, then one
# packed file under $OUT, so a call cut at its limit still brings its results back):
#   bash bench/device_call.sh 29
# 29, 34 and 30 ran on an H200 on 2026-12-06 (bench/results/h200-2026-12-06/), 36 on an H100
# (bench/results/h100-2026-12-06b/).
# 41, 43 and 44 ran on H100s on 2026-12-06 (bench/results/h100-2026-12-06d/: placements). Next:
# step 44 on an H200 (issue 13's table with placements), the exploit keep_one_placement, and
# whether the allocators' cache given back leaves the large cases room for their placements.
# 37 to 42 ran on H100s on 2026-12-06 (bench/results/h100-2026-12-06c/): all 63 exploits have now
# met the judge on a GPU. Next (build .whl first; device_setup.sh checks it): step 41 on an H200
# (the placement probe there, then issue 13's table with the serial scores), and the
# interference ratio's spread over the corpus on an H200 with the clean phase on the pairs'
# memory (every gpu_bench case records it): can the 3-10% retry band narrow?
# 75 ran on an H100 on 2026-12-07 (bench/results/h100-2026-12-07g/).
# 51 and 52 ran on H100s on 2026-12-06 (bench/results/h100-2026-12-06f/: the timing phase by stage,
# captures at once kept, audits read later reverted). Next: A/B runs of less judge work per
# evaluation (fewer estimate blocks, one slot set-up per case), then step 46 on an H200. A short
# call that cannot afford the serial pass should pass `--warm-pass` to service_bench.py (step 52
# measured from an empty kernel store: 34 builds inside its window).
# 55 ran on an H100 on 2026-12-06 (bench/results/h100-2026-12-06g/: the judge's cuts since fe1121c,
# 23.3 against 22.7 evaluations per GPU-minute, GPU-locked 2.54 against 2.60 s); 58 (56 then 57:
# the service, two exploits, the judge profiled on six tasks) ran on another H100
# (bench/results/h100-2026-12-06h/); 59 (the audits' flag kernel and the pidfd exit wait, A/B
# against c76bcff) on a third: 24.9 against 23.3 per GPU-minute (bench/results/h100-2026-12-06i/).
# Next: step 60, the new engine alone with four audit exploits (bash bench/device_call.sh 60 270),
# on an H200 or a slow H100 host (12-06h's: 20.5). Look for "timed audits' flags" in the
# service's output: all by PyTorch means the kernel failed its check.
# Results go under $OUT/step<N>/.
# The engine before the judge (step 6) is commit be89b5f (3a4c069~1). If .whl-old or .old-tree are
# missing:  git worktree add /tmp/old-aka be89b5f
#           python3 -m pip wheel -q --no-deps -w .whl-old /tmp/old-aka /tmp/old-aka/plugins/aka-*/
#           mkdir -p .old-tree && cp -r /tmp/old-aka/tasks /tmp/old-aka/tests .old-tree/
set -uo pipefail
step="${1:?step 1 to 75}"
AA_END_S="${AA_END_S:-480}"
# The 16 GPU tasks with stored solutions the service is measured on (issue 13), and the smoke
# shapes of issue 12's 2x-work probes.
# The exploits that reach for the judge's process or the host (seccomp, scheduling, OOM, disk),
# and one that caches by pointer (steps 63-65).
SANDBOX_EXPLOITS="limit_the_judge starve_the_judge signal_the_judge cache_by_pointer
  take_the_cpus_first hide_from_the_oom_killer fill_the_disk"
SERVICE_TASKS="cuda2cuda/rms_norm cuda2cuda/transpose torch2cuda/fused_add_rms_norm
  torch2cuda/silu_and_mul torch2triton/cross_entropy torch2triton/fp8_quantize
  torch2triton/gemm_bias_gelu triton2triton/causal_attention triton2triton/embedding_gather
  triton2triton/gelu triton2triton/gemm_bf16 triton2triton/layer_norm triton2triton/rms_norm
  triton2triton/rotary_embedding triton2triton/silu_and_mul triton2triton/softmax"
SMOKE_TASKS="torch2triton/grad_norm_clip torch2cuda/silu_and_mul torch2triton/geglu
  torch2triton/row_logsumexp torch2triton/adamw_step torch2cuda/gelu_tanh_bias
  triton2triton/causal_attention torch2triton/cross_entropy torch2triton/linear_bias_residual
  torch2triton/embedding_bag_mean cuda2cuda/embedding_gather_naive cuda2cuda/row_sum_fp32"
# The exploits step 31 did not reach on an H100 on 2026-12-06 (GPU-only ones first).
RED_REST="wrong_in_the_last_element wait_for_the_gpu_in_every_call transpose_returns_a_view strided_output unexportable_outputs too_many_outputs transpose_by_torch_copy visible_shapes_only network_exfiltration patch_checks_in_process patch_runner_reply plant_a_slow_baseline_build poison_installed_checking poison_other_scratch poison_pth_hook poison_task_and_solutions ptrace_everyone read_stored_solution segfault shell_escape signal_the_judge steal_environment torch_compute_hidden_in_helper torch_gelu_in_triton_task torch_gelu_obfuscated torch_math_methods torch_ops_namespace user_namespace_escape"
source bench/device_setup.sh  # exits (set -e) when .whl was not built from this tree
out="${OUT:-/tmp/out}/step$step"
mkdir -p "$out"
exploits() {  # half 1 or 2 of the GPU red team, by name
  python3 - "$1" <<'PY'
import sys
sys.path.insert(0, "tests/redteam")
from harness import load_exploits
names = [e.name for e in load_exploits("cuda")]
half = len(names) // 2
print(" ".join(names[:half] if sys.argv[1] == "1" else names[half:]))
PY
}
ab_service() {  # OLD=COMMIT REPEATS DEADLINE_S: the service under each engine, new first
  if [ ! -d /opt/aka-old ]; then
    echo "step $step needs .whl-old: $1 bash bench/build_device_wheels.sh" >&2; return 2
  fi
  local engine site
  for engine in new old; do
    site=/opt/aka-site; [ "$engine" = old ] && site=/opt/aka-old
    echo "== engine $engine ($site)"
    AKA_KERNEL_CACHE="/tmp/kernel-store-$step" PYTHONPATH="$site" python3 \
      bench/service_bench.py --out "$out/service-$engine" --repeats "$2" --in-flight 64 \
      --per-gpu 4 --warm 0 --single 0 --warm-pass --deadline-s "$3" --tasks $SERVICE_TASKS \
      2>&1 | grep -v "^ERROR\|^Traceback\|^  File\|^    " | grep \
      "evaluations per GPU-minute\|mean seconds\|mean round-trip\|warm pass\|lock\|flags\|quick"
  done
  return 0  # a run's own failure shows in its output; only a missing old engine stops the step
}
service_then_exploits() {  # SERVICE_S REDTEAM_S EXPLOIT...: the service once, then exploits
  local service_s="$1" redteam_s="$2"
  shift 2
  AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
    --out "$out/service" --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 --single 0 --warm-pass \
    --deadline-s "$service_s" --tasks $SERVICE_TASKS 2>&1 \
    | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,32p
  python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s "$redteam_s" \
    --exploits "$@" 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
}
T3="triton2triton/gelu torch2triton/gemm_bias_gelu torch2cuda/silu_and_mul"
case "$step" in
  1)
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 420 \
      --exploits $(exploits 1) 2>&1 | tail -40
    ;;
  2)
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 360 \
      --exploits $(exploits 2) 2>&1 | tail -40
    ;;
  3)
    shift
    python3 bench/service_bench.py --out "$out/service" --repeats 2 --in-flight 64 --per-gpu 2 \
      --warm 5 --serial ${1:+--tasks "$@"} 2>&1 | tail -45
    ;;
  4)
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa,double --aa-repeats 1 \
      --deadline-s 540 2>&1 | tail -30
    ;;
  5)
    python3 bench/ncu_accuracy.py --out "$out/ncu" --reps 3 --deadline-s 480 2>&1 | tail -80
    ;;
  6)
    # The same tasks, their timed blocks aimed at 2 ms (runners read /opt, not /tmp).
    python3 - <<'PY'
import shutil
from pathlib import Path
from aka_core.yamlio import dump_yaml, load_plain_yaml
dest = Path("/opt/aka-b2tree")
shutil.rmtree(dest, ignore_errors=True)
shutil.copytree("tasks", dest / "tasks")
shutil.copytree("tests/solutions", dest / "tests" / "solutions")
for task_yaml in (dest / "tasks").rglob("task.yaml"):
    doc = load_plain_yaml(task_yaml)
    doc.setdefault("timing", {})["block_ms"] = 2.0
    task_yaml.write_text(dump_yaml(doc))
PY
    python3 bench/latency_compare.py --out "$out/latency" --engine old=/opt/aka-old:.old-tree \
      --engine new=/opt/aka-site:. --engine b2=/opt/aka-site:/opt/aka-b2tree --repeats 2 $T3 \
      2>&1 | tail -8
    AA="triton2triton/gelu triton2triton/embedding_gather triton2triton/softmax"
    for ms in 4 2; do
      python3 bench/gpu_bench.py --out "$out/aa-$ms" --block-ms $ms --sections aa,double \
        --aa-repeats 2 --tasks $AA --deadline-s 100 2>&1 | tail -12
    done
    ;;
  8)
    python3 - <<'PY'
import shutil
from pathlib import Path
from aka_core.yamlio import dump_yaml, load_plain_yaml
dest = Path("/opt/aka-samecases")
shutil.rmtree(dest, ignore_errors=True)
shutil.copytree("tasks", dest / "tasks")
shutil.copytree("tests/solutions", dest / "tests" / "solutions")
task_yaml = dest / "tasks" / "triton2triton" / "gelu" / "task.yaml"
doc = load_plain_yaml(task_yaml)
doc.pop("held_out_draws")
doc["held_out_cases"] = [{"name": "m9973_n14337_bf16",
                          "params": {"M": 9973, "N": 14337, "dtype": "bfloat16"}}]
task_yaml.write_text(dump_yaml(doc))
PY
    python3 bench/latency_compare.py --out "$out/latency" --engine old=/opt/aka-old:.old-tree \
      --engine new=/opt/aka-site:/opt/aka-samecases --repeats 3 triton2triton/gelu 2>&1 | tail -4
    python3 bench/service_bench.py --out "$out/service" --tasks triton2triton/gelu \
      triton2triton/softmax torch2cuda/silu_and_mul triton2triton/rms_norm --repeats 3 \
      --in-flight 16 --per-gpu 2 --warm 4 --serial 2>&1 | tail -25
    ;;
  9)
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --deadline-s 560 \
      --jobs 2 2>&1 | tail -50
    ;;
  10)
    python3 bench/ncu_accuracy.py --out "$out/ncu" --reps 3 --deadline-s 500 --tasks \
      triton2triton/gelu cuda2cuda/transpose triton2triton/embedding_gather \
      torch2triton/cross_entropy triton2triton/causal_attention triton2triton/rotary_embedding \
      torch2triton/row_cumsum torch2triton/l2_normalize_rows torch2triton/moe_router_topk \
      torch2triton/geglu 2>&1 | tail -60
    ;;
  11)
    shift
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --by-task \
      --no-trivial --deadline-s 530 --jobs 3 --tasks "$@" 2>&1 | tail -80
    ;;
  12)
    shift
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --by-task \
      --no-trivial --deadline-s 200 --jobs 3 --tasks "$@" 2>&1 | tail -20
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 200 \
      --exploits wait_for_the_gpu_in_every_call transpose_returns_a_view transpose_by_torch_copy \
      2>&1 | tail -20
    ;;
  13)
    # The two tasks whose baselines overflowed the launch queue, the red team's launch-queue
    # exploit, then the first e2e task (its weights generated once into $AKA_E2E_CACHE).
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --by-task \
      --no-trivial --deadline-s 170 --jobs 2 --tasks torch2triton/linear_recurrence_scan \
      torch2triton/moe_grouped_gemm 2>&1 | tail -20
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 80 \
      --exploits stall_large_blocks 2>&1 | tail -8
    export AKA_E2E_CACHE=/opt/e2e-cache
    python3 bench/e2e_bench.py --out "$out/e2e" --sections solution,validate \
      --tasks ${E2E_TASKS:-qwen3_norms} --deadline-s "${E2E_DEADLINE_S:-250}" 2>&1 | tail -30
    ;;
  14)
    # The e2e tasks (issue 14): validation (A/A), the stored solutions, the mutants.
    export AKA_E2E_CACHE=/opt/e2e-cache
    shift
    python3 bench/e2e_bench.py --out "$out/e2e" --sections "${E2E_SECTIONS:-validate,solution,mutants}" \
      ${1:+--tasks "$@"} --deadline-s "${E2E_DEADLINE_S:-520}" 2>&1 | tail -40
    ;;
  15)
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --by-task \
      --no-trivial --deadline-s 150 --jobs 2 --tasks torch2triton/linear_recurrence_scan \
      torch2triton/moe_grouped_gemm 2>&1 | tail -12
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 60 \
      --exploits stall_large_blocks 2>&1 | tail -6
    timeout $((560 - SECONDS)) python3 bench/service_bench.py --out "$out/service" --repeats 2 \
      --in-flight 64 --per-gpu 2 --warm 5 --serial --tasks $SERVICE_TASKS \
      2>&1 | tail -30
    ;;
  16)
    python3 bench/gpu_bench.py --out "$out/replay" --sections validate,replay --by-task \
      --no-trivial --deadline-s 60 --jobs 2 --tasks torch2triton/moe_grouped_gemm 2>&1 | tail -6
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 30 \
      --exploits stall_large_blocks 2>&1 | tail -6
    python3 bench/gpu_bench.py --out "$out/double" --sections double --backends cuda,triton \
      --jobs 3 --deadline-s $((520 - SECONDS)) 2>&1 | tail -80
    ;;
  17)
    timeout 540 python3 bench/service_bench.py --out "$out/service" --repeats 2 --in-flight 64 \
      --per-gpu 2 --warm 3 --single 3 --tasks $SERVICE_TASKS 2>&1 | tail -30
    ;;
  18)
    python3 bench/double_probe.py --reps 30 triton2triton/transpose_bf16:m16384_n16384_bf16 \
      torch2triton/masked_softmax:n16384_d4096_bf16 \
      torch2triton/paged_kv_cache_write:t32768_nb4096_bs16_h8_d128_bf16 \
      triton2triton/transpose_bf16:m8192_n14336_bf16 torch2triton/masked_softmax:n4096_d16384_bf16 \
      triton2triton/gelu:m8192_n16384_bf16 2>&1 | tail -12
    ;;
  19)
    python3 bench/triton_ahead_probe.py 2>&1 | tail -4  # issue 13: Triton compiles before the lock?
    bash bench/device_steps.sh 18
    python3 bench/gpu_bench.py --out "$out/graph2x" --sections graph2x --backends cuda,triton \
      --jobs 3 --deadline-s $((520 - SECONDS)) 2>&1 | tail -80
    ;;
  20)
    P="triton2triton/gelu triton2triton/softmax triton2triton/embedding_gather cuda2cuda/transpose
       torch2triton/cross_entropy triton2triton/causal_attention torch2cuda/silu_and_mul
       triton2triton/layer_norm"
    for pairs in 5 10; do
      python3 bench/gpu_bench.py --out "$out/pairs-$pairs" --sections aa,double --aa-repeats 2 \
        --min-pairs "$pairs" --tasks $P --jobs 3 --deadline-s 230 2>&1 | tail -14
    done
    ;;
  21)
    # Issue 12's tiny cases: the 2x-work probe without the judge on smoke shapes (the same call
    # twice, and twice on inputs of its own), then the judge on them with graph blocks sized from
    # replays; issue 13's timing trade: A/A and 2x work with at least 5 pairs per case.
    python3 bench/double_probe.py --reps 30 $(for t in $SMOKE_TASKS; do case $t in cuda2cuda/*) ;;
      *) printf '%s:tiny ' "$t" ;; esac; done) \
      triton2triton/transpose_bf16:m16384_n16384_bf16 \
      torch2triton/paged_kv_cache_write:t32768_nb4096_bs16_h8_d128_bf16 2>&1 | tail -16
    python3 bench/gpu_bench.py --out "$out/graph2x" --sections graph2x --tasks $SMOKE_TASKS \
      --jobs 3 \
      --deadline-s 150 2>&1 | tail -18
    P="triton2triton/gelu triton2triton/softmax triton2triton/embedding_gather cuda2cuda/transpose
       torch2triton/cross_entropy triton2triton/causal_attention torch2cuda/silu_and_mul
       triton2triton/layer_norm"
    python3 bench/gpu_bench.py --out "$out/pairs-5" --sections aa,double --aa-repeats 2 \
      --min-pairs 5 --tasks $P --jobs 3 --deadline-s $((560 - SECONDS)) 2>&1 | tail -14
    ;;
  22)
    # Issue 13: the reward service (5 pairs, builds before the lock, preload); issue 12: the
    # smoke shapes with the flush after the copy (L2 clean), then A/A and 2x on three tasks.
    timeout 330 python3 bench/service_bench.py --out "$out/service" --repeats 2 --in-flight 64 \
      --per-gpu 2 --warm 3 --single 3 --tasks $SERVICE_TASKS 2>&1 | tail -32
    python3 bench/gpu_bench.py --out "$out/graph2x" --sections graph2x --tasks $SMOKE_TASKS \
      --jobs 3 \
      --deadline-s $(( (540 - SECONDS) * 6 / 10 )) 2>&1 | tail -18
    python3 bench/gpu_bench.py --out "$out/flush" --sections aa,double --tasks triton2triton/gelu \
      triton2triton/softmax cuda2cuda/transpose --jobs 3 --deadline-s $((560 - SECONDS)) 2>&1 \
      | tail -8
    ;;
  23)
    # Issue 13: the service with 4 slots per GPU (step 22: the GPU-exclusive part 3.4 s, but 2
    # slots left the GPU idle while both built before the lock). Short: what device time is left.
    python3 bench/service_bench.py --out "$out/service" --repeats 2 --in-flight 64 --per-gpu 4 \
      --warm 0 --single 0 --deadline-s "${SERVICE_DEADLINE_S:-130}" --tasks $SERVICE_TASKS 2>&1 \
      | tail -12
    ;;
  24)
    # What 12-03d left: the compile-ahead probe (the driver's utilities built ahead too?), the
    # smoke shapes with graph blocks sized from replays and a 2x candidate doing twice the work
    # on its own data (issue 12), then the service with builders started ahead at 2 and at 4
    # slots, a fixed time each, each from an empty kernel store (issue 13).
    python3 bench/triton_ahead_probe.py 2>&1 | tail -3
    python3 bench/gpu_bench.py --out "$out/graph2x" --sections graph2x --tasks $SMOKE_TASKS \
      --jobs 3 \
      --deadline-s 190 2>&1 | tail -18
    for slots in 2 4; do
      AKA_KERNEL_CACHE="/tmp/kernel-store-$slots" python3 bench/service_bench.py \
        --out "$out/service-$slots" --repeats 3 --in-flight 64 \
        --per-gpu "$slots" --warm 0 --single 0 --deadline-s 140 --tasks $SERVICE_TASKS 2>&1 \
        | sed -n 1,8p
    done
    ;;
  25)
    # Issue 13: the GPU-exclusive part is 3.4-3.6 s (12-03e) and the rate its bound; where do
    # its seconds go? Each task twice: the first fills the kernel store, the second is profiled
    # as a warm evaluation is.
    python3 bench/context_probe.py
    for t in triton2triton/softmax triton2triton/gelu cuda2cuda/transpose; do
      python3 bench/judge_profile.py --out "$out/warmup" --top 5 "$t" >/dev/null 2>&1
    done
    python3 bench/judge_profile.py --out "$out/profile" --top 60 triton2triton/softmax \
      triton2triton/gelu cuda2cuda/transpose 2>&1 | grep -E "^## |^phases|^case|^judge block|^runner"
    # Then the service as the issue measures it: 4 slots, single requests, `aka eval --service`.
    AKA_KERNEL_CACHE=/tmp/kernel-store-25 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 \
      --warm 3 --single 5 --deadline-s "${SERVICE_DEADLINE_S:-200}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    ;;
  26)
    # Issue 13 (and 12's accuracy): each side's blocks sized on its own work; first the A/B on
    # the stored solutions that are much faster than their baselines (the per-call times must
    # not move), then the service as in step 25.
    python3 bench/block_sizes_ab.py --out "$out/ab" torch2triton/cross_entropy \
      torch2triton/fp8_quantize cuda2cuda/transpose torch2cuda/fused_add_rms_norm \
      triton2triton/gelu 2>&1 | tail -40
    AKA_KERNEL_CACHE=/tmp/kernel-store-26 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --single 3 \
      --deadline-s "${SERVICE_DEADLINE_S:-110}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    ;;
  27)
    # The judge since 12-03g: the candidate's audited call from all of its block (exploit
    # skip_calls_past_the_baselines_block and the other call skippers), correctness's quick pass
    # (its speed on the GPU), then the service with each slot's next evaluation started at once
    # under load (the 12-03g run started it only after the current one), runners ready before
    # the lock and preloaded ahead, and each request's timeline. First: does a process starting
    # up on the GPU (what a slot's next evaluation does beside the one timing) slow a timed kernel?
    python3 bench/startup_interference_probe.py --out "$out/startup.json" --seconds 6
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 150 \
      --exploits skip_calls_past_the_baselines_block skip_half_the_calls \
      skip_a_sliver_when_timed steer_timing_method 2>&1 | tail -12
    python3 bench/compare_speed.py --elements 134217728 --repeats 5
    # Single requests 6 s apart: a slot's next evaluation starts after the last one ends, and
    # now preloads the backends (12-03g: 3 s apart).
    AKA_KERNEL_CACHE=/tmp/kernel-store-27 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 3 --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-180}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    ;;
  28)
    # Issue 13 with a case's CI from exact binomial ranks, checked after every pair (one stray
    # pair among the first five cost ten more pairs: 15-pair cases in 12-04): the service as in
    # step 27, then issue 12's A/A and 2x work on eight tasks, so the stop rule's accuracy is seen.
    AKA_KERNEL_CACHE=/tmp/kernel-store-28 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 3 --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    P="triton2triton/gelu triton2triton/softmax triton2triton/embedding_gather cuda2cuda/transpose
       torch2triton/cross_entropy triton2triton/causal_attention torch2cuda/silu_and_mul
       triton2triton/layer_norm"
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa,double --aa-repeats 1 --tasks $P \
      --jobs 3 --deadline-s $((AA_END_S - SECONDS)) 2>&1 | tail -14
    ;;
  29)
    # Issue 13 on the judge since 12-04b, unmeasured: the GPU lock let go before the baseline's
    # teardown after a normal timing, both runners allocating a case's slots at once, the
    # correctness checks' quick pass as one kernel (its speed against PyTorch's first). Then
    # where the correctness and timing phases' seconds go (12-03f's profile was before the quick
    # pass and the exact-rank stop rule), then the service, then the exploits that leave GPU work
    # or processes behind (what the early release could expose) and the two against the
    # comparison (the kernel's first red team).
    python3 bench/compare_speed.py --elements 134217728 --repeats 5
    python3 bench/judge_profile.py --out "$out/profile" --top 45 triton2triton/softmax \
      triton2triton/gelu cuda2cuda/transpose torch2triton/gemm_bias_gelu >/dev/null 2>&1
    AKA_KERNEL_CACHE=/tmp/kernel-store-29 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 120 \
      --exploits gpu_hog_daemon daemon_survives leave_processes background_thread \
      grab_gpu_memory wrong_in_the_last_element inf_for_a_finite_value 2>&1 | tail -12
    ;;
  30)
    # Issue 12 with the exact-rank stop rule: A/A and 2x work on eight tasks (12-04b's ran the
    # judge before it), then the smoke shapes' A/A and 2x (graph-timed, within 1% not yet on all).
    P="triton2triton/gelu triton2triton/softmax triton2triton/embedding_gather cuda2cuda/transpose
       torch2triton/cross_entropy triton2triton/causal_attention torch2cuda/silu_and_mul
       triton2triton/layer_norm"
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa,double --aa-repeats 1 --tasks $P \
      --jobs 3 --deadline-s 240 2>&1 | tail -14
    python3 bench/gpu_bench.py --out "$out/graph2x" --sections graph2x --tasks $SMOKE_TASKS \
      --jobs 3 --deadline-s $((560 - SECONDS)) 2>&1 | tail -18
    ;;
  31)
    # Every GPU exploit on the judge as it is now (the lock let go before the baseline's
    # teardown, the comparison as one kernel, the warm-up blocks unaudited), then the stored
    # solutions of the exploited tasks, which must still be accepted at their usual speedups.
    # No tail: its progress lines reach the call's log as they come (a call cut at its limit
    # kept nothing of a pipe into tail on 2026-12-06).
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam \
      --deadline-s "${REDTEAM_DEADLINE_S:-440}" 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  32)
    # What step 31 did not reach on an H100 on 2026-12-06 (bench/results/h100-2026-12-06/): the
    # GPU-only ones first (the comparison's kernel, output contracts, waits in every call).
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam \
      --deadline-s "${REDTEAM_DEADLINE_S:-440}" --exploits $RED_REST 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  33)
    # What the changes since 12-04b's last service run (798cb76) did to the rate and to single
    # requests, measured side by side on one machine, so that an H100 can answer it too (issue
    # 13's targets are H200 numbers; a difference between engines on one machine is not). Each
    # engine from an empty kernel store, the same tasks, the new engine first.
    if [ ! -d /opt/aka-old ]; then
      echo "step 33 needs .whl-old: OLD=798cb76 bash bench/build_device_wheels.sh" >&2; exit 2
    fi
    for engine in new old; do
      site=/opt/aka-site; [ "$engine" = old ] && site=/opt/aka-old
      echo "== engine $engine ($site)"
      AKA_KERNEL_CACHE="/tmp/kernel-store-33-$engine" PYTHONPATH="$site" python3 \
        bench/service_bench.py --out "$out/service-$engine" --repeats 2 --in-flight 64 \
        --per-gpu 4 --warm 0 --single 3 --single-gap 6 --deadline-s "${SERVICE_DEADLINE_S:-110}" \
        --tasks $SERVICE_TASKS 2>&1 | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,12p
    done
    ;;
  34)
    # Where a warm evaluation's seconds go now, inside the judge and in the process around it
    # (step 29's profile alone, for a machine that has time for little else).
    python3 bench/judge_profile.py --out "$out/profile" --top 45 triton2triton/softmax \
      triton2triton/gelu cuda2cuda/transpose torch2triton/gemm_bias_gelu >/dev/null 2>&1
    grep -h "end to end\|^phases" "$out"/profile/*.md
    # A service job as a single request meets it (judge and runners started ahead), profiled
    # without and with cProfile: what a request costs outside the judge, and the judge's start-up.
    python3 bench/job_profile.py --out "$out/job-plain" --repeats 4 --ready-s 6 --no-profile \
      2>&1 | grep -v "\[info"
    python3 bench/job_profile.py --out "$out/job" --repeats 2 --ready-s 6 --judge-profile \
      --top 40 >/dev/null 2>&1
    ;;
  35)
    # grab_gpu_memory after the judge learned to test whose an out-of-memory error in the task's
    # code is (12-06b: the reference's OOM was the task's error), then step 32's exploits. First
    # the quick pass's kernel on float64 references against PyTorch's pass (figures agree?).
    python3 bench/compare_speed.py --elements 134217728 --repeats 3
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam \
      --deadline-s "${REDTEAM_DEADLINE_S:-280}" --exploits grab_gpu_memory \
      off_by_one_against_a_float64_reference one_bit_off_in_an_exact_task \
      ${RED_REST#wrong_in_the_last_element } 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  36)
    # What fits a short call: the quick pass on float64 references (the kernel against PyTorch's
    # pass, figures agree?), grab_gpu_memory against the OOM blame test, then the service on the
    # 16 tasks x 2 (its GPU-exclusive seconds against 12-06's 2.79 s: correctness's quick passes
    # on float64 references and bit-exact outputs).
    python3 bench/compare_speed.py --elements 134217728 --repeats 3
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 60 \
      --exploits grab_gpu_memory 2>&1 | grep --line-buffered "redteam\|INCOMPLETE\|grab"
    AKA_KERNEL_CACHE=/tmp/kernel-store-36 python3 bench/service_bench.py --out "$out/service" \
      --repeats 2 --in-flight 64 --per-gpu 4 --warm 0 --single 0 \
      --deadline-s "${SERVICE_DEADLINE_S:-110}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,14p
    ;;
  37)
    # Issue 13's done-when in one run: serial `aka eval` of every stored solution first (the
    # scores the service's must match, and a kernel store warm as the issue's "warm caches"
    # says), single requests and `aka eval --service`, then 64 in flight on 16 tasks x 3 (the
    # quick pass's float64 and bit-exact paths and the unwaited judge exit, unmeasured there).
    # Then the red team's least recently run exploits until the call's end.
    AKA_KERNEL_CACHE=/tmp/kernel-store-37 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    left=$((${STEP_END_S:-520} - SECONDS))
    if [ "$left" -gt 60 ]; then
      python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s "$left" \
        --exploits grab_gpu_memory off_by_one_against_a_float64_reference \
        one_bit_off_in_an_exact_task ${RED_REST#wrong_in_the_last_element } 2>&1 \
        | grep --line-buffered "redteam\|INCOMPLETE"
    fi
    ;;
  38)
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      AKA_KERNEL_CACHE=/tmp/kernel-store-38 python3 bench/service_bench.py --out "$out/service" \
        --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
        --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
        | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
      exit 0
    fi
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 200 \
      --exploits shell_escape signal_the_judge steal_environment strided_output \
      too_many_outputs torch_compute_hidden_in_helper torch_gelu_in_triton_task \
      torch_gelu_obfuscated torch_math_methods torch_ops_namespace transpose_by_torch_copy \
      transpose_returns_a_view unexportable_outputs user_namespace_escape visible_shapes_only \
      wait_for_the_gpu_in_every_call 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    # The same candidate evaluated again and again, one at a time: 12-06's service run read
    # softmax 1.07% and silu_and_mul 0.9% from the serial evaluation, each CI +-0.1%. Whole
    # records kept: which of o, the baseline's and the candidate's per-call times moves.
    mkdir -p "$out/repeats"
    for round in 1 2 3; do
      for task in triton2triton/softmax triton2triton/silu_and_mul cuda2cuda/transpose \
                  triton2triton/layer_norm; do
        [ "$SECONDS" -gt "${STEP_END_S:-500}" ] && break 2
        AKA_KERNEL_CACHE=/tmp/kernel-store-38 python3 -m aka_core.cli eval "tasks/$task" \
          --candidate "tests/solutions/$task" --json --held-out-seed 1 \
          > "$out/repeats/${task//\//.}.$round.json" 2>/dev/null
        python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['evaluation']['performance']; print(sys.argv[2], round(p['speedup'], 4), [round(x, 4) for x in p['ci95']])" \
          "$out/repeats/${task//\//.}.$round.json" "$task" || true
      done
    done
    ;;
  39)
    # Step 38 (H100) read the baseline's per-call time 1-4% apart between evaluations, and
    # between a case's interleaved and clean phases (new slots, new capture), the candidate's
    # 0.1%: placement in GPU memory, per evaluation? layer_norm as the control that did not move.
    python3 bench/placement_probe.py --placements 8 --reps 15 \
      triton2triton/softmax:m16384_n8192_fp16 triton2triton/silu_and_mul:m8192_n11008_bf16 \
      triton2triton/silu_and_mul:m4096_n14336_bf16 cuda2cuda/transpose:m16384_n8192_bf16 \
      triton2triton/layer_norm:m16384_n8192_bf16 2>&1 | grep -v "^\[\|Warning"
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      AKA_KERNEL_CACHE=/tmp/kernel-store-39 python3 bench/service_bench.py --out "$out/service" \
        --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
        --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
        | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    fi
    ;;
  40)
    # Step 39 (H100): a new capture alone (the outputs moved) moved softmax's baseline 5.4%,
    # transpose's 4.7%, within a placement 0.5-0.8%. With a spacer of up to 4 MiB (offsets
    # within 2 MiB pages) or 64 MiB (other pages) before each input set, every call of a block
    # finds its inputs at its own offset from its outputs: does the block then average them?
    for mib in 4 64; do
      echo "== spacers of up to $mib MiB"
      python3 bench/placement_probe.py --placements 6 --reps 15 --stagger-mib $mib \
        triton2triton/softmax:m16384_n8192_fp16 triton2triton/silu_and_mul:m8192_n11008_bf16 \
        cuda2cuda/transpose:m16384_n8192_bf16 2>&1 | grep -v "^\[\|Warning"
    done
    ;;
  41)
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      python3 bench/placement_probe.py --placements 6 --reps 15 --stagger-mib 4 \
        triton2triton/softmax:m16384_n8192_fp16 triton2triton/silu_and_mul:m8192_n11008_bf16 \
        cuda2cuda/transpose:m16384_n8192_bf16 2>&1 | grep -v "^\[\|Warning"
      AKA_KERNEL_CACHE=/tmp/kernel-store-41 python3 bench/service_bench.py --out "$out/service" \
        --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
        --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
        | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
      exit 0
    fi
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa --aa-repeats 3 --jobs 1 \
      --tasks triton2triton/softmax triton2triton/silu_and_mul cuda2cuda/transpose \
      --deadline-s 150 2>&1 | tail -8
    ;;
  42)
    # Step 41 (H100): 1 of 3 transpose A/A evaluations an infra_error, the clean phase's new
    # memory 5% faster than the pairs' (placement, not interference). Now the clean phase
    # times the baseline on the memory and graph its pairs used.
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa --aa-repeats 3 --jobs 1 \
      --tasks triton2triton/softmax triton2triton/silu_and_mul cuda2cuda/transpose \
      --deadline-s 150 2>&1 | tail -8
    python3 - "$out/aa/bench.json" <<'PY'
import json, sys
for task, runs in json.load(open(sys.argv[1]))["aa"].items():
    for run in runs:
        print(task, run.get("speedup"), (run.get("failure") or {}).get("message", "")[:90],
              [(c.get("clean_placement"), round(c.get("interference") or 0, 4))
               for c in run.get("cases") or []])
PY
    serial=""; single=0; deadline=120
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
      serial="--serial"; single=4; deadline=150
    fi
    AKA_KERNEL_CACHE=/tmp/kernel-store-42 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 $serial --single $single --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-$deadline}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    ;;
  43)
    # Placements: each side's pairs rotate over 3 sets of slots and graphs at memory of their
    # own (timing.placements). Step 41 again (H100 12-06d without them: A/A worst 1.143%,
    # transpose's CI held 1.0 in 0 of 3), the timing exploits, then issue 13's table.
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa --aa-repeats 3 --jobs 1 \
      --tasks triton2triton/softmax triton2triton/silu_and_mul cuda2cuda/transpose \
      --deadline-s 150 2>&1 | tail -8
    python3 - "$out/aa/bench.json" <<'PY'
import json, sys
for task, runs in json.load(open(sys.argv[1]))["aa"].items():
    for run in runs:
        print(task, run.get("speedup"), run.get("ci95"),
              (run.get("failure") or {}).get("message", "")[:90],
              [(c.get("placements"), c.get("pairs"), c.get("stop_reason"),
                round(c.get("speedup") or 0, 4), round(c.get("interference") or 0, 4))
               for c in run.get("cases") or []])
PY
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 60 \
      --exploits skip_calls_past_the_baselines_block correct_only_when_checked \
      skip_a_sliver_when_timed stall_large_blocks 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    AKA_KERNEL_CACHE=/tmp/kernel-store-43 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    ;;
  44)
    # Step 43's service part, alone (step 43 ran out of time before it): issue 13's table with
    # placements and the task CI over them.
    AKA_KERNEL_CACHE=/tmp/kernel-store-44 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    ;;
  45)
    # The allocator now gives back what it only caches before placements are sized (step 44b,
    # H100: 94 of 189 service cases had room for one placement). First the exploit that keeps
    # one favourite placement (never yet run on a GPU), then issue 13's table, then how many
    # placements each service case had.
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 60 \
      --exploits keep_one_placement 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    AKA_KERNEL_CACHE=/tmp/kernel-store-45 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    python3 bench/placement_histogram.py "$out/service/bench.json" 2>&1 | tail -30
    ;;
  46)
    # Step 45 (H100) with every CI carrying timing.between_runs_percent (0.3: step 45's
    # evaluations moved a case 0.32% rms beyond what their own CIs said): issue 13's table, the
    # placements, then A/A (does the CI hold 1.0?).
    AKA_KERNEL_CACHE=/tmp/kernel-store-46 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    python3 bench/placement_histogram.py "$out/service/bench.json" 2>&1 | tail -30
    python3 bench/gpu_bench.py --out "$out/aa" --sections aa --aa-repeats 2 --jobs 1 \
      --tasks triton2triton/softmax triton2triton/silu_and_mul cuda2cuda/transpose \
      --deadline-s 150 2>&1 | tail -8
    python3 bench/recompute_ci.py --expect 1.0 --between-runs-percent 0.3 "$out/aa/bench.json" \
      | tail -1
    ;;
  47)
    # Blocks now shrink (to a quarter at most) where that makes room for every placement: the
    # exploits that play on blocks, the memory, the audits and the window, against it.
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 60 \
      --exploits skip_calls_past_the_baselines_block correct_only_when_checked \
      skip_a_sliver_when_timed stall_large_blocks skip_half_the_calls grab_gpu_memory \
      early_done_word side_stream_escape gpu_hog_thread cache_by_pointer keep_one_placement \
      2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  48)
    # Step 47's exploits its 60 s deadline left unrun.
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 300 \
      --exploits keep_one_placement side_stream_escape skip_a_sliver_when_timed \
      skip_calls_past_the_baselines_block skip_half_the_calls stall_large_blocks \
      2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  49)
    # The clean phase's memory attributed to the candidate that held it (held_by_candidate): the
    # exploit against it, grab_gpu_memory, and the stored solutions after them (every GPU
    # evaluation now reads the memory the candidate's death frees).
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 150 \
      --exploits hoard_memory_and_slow_visible_cases grab_gpu_memory 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE\|After the red team"
    python3 - "$out/redteam/bench.json" <<'PY2'
import json, sys
for name, v in json.load(open(sys.argv[1])).get("redteam", {}).items():
    print(name, v.get("kind"), v.get("verdict"), (v.get("message") or "")[:240])
PY2
    ;;
  50)
    # Where the GPU-exclusive seconds go now, stage by stage (slots set up, estimates, captures,
    # pairs, the clean phase) and inside each runner operation: the service once over the 16
    # tasks (no serial pass), then the judge profiled on four of them (kernel store warm).
    AKA_KERNEL_CACHE=/tmp/kernel-store-50 python3 bench/service_bench.py --out "$out/service" \
      --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 --single 0 \
      --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,40p
    AKA_KERNEL_CACHE=/tmp/kernel-store-50 python3 bench/judge_profile.py --out "$out/profile" \
      --top 60 triton2triton/softmax cuda2cuda/rms_norm torch2cuda/fused_add_rms_norm \
      torch2triton/cross_entropy >/dev/null 2>&1
    grep -h "end to end\|^phases\|^judge stages\|^judge block" "$out"/profile/profile.md
    ;;
  51)
    # A/B on one machine: the judge with audits read after the next block is armed and both
    # sides captured at once (new) against the judge before them (.whl-old: OLD=b96229d), each
    # from an empty kernel store, new first; then the exploits that play on the audits.
    if [ ! -d /opt/aka-old ]; then
      echo "step 51 needs .whl-old: OLD=b96229d bash bench/build_device_wheels.sh" >&2; exit 2
    fi
    for engine in new old; do
      site=/opt/aka-site; [ "$engine" = old ] && site=/opt/aka-old
      echo "== engine $engine ($site)"
      AKA_KERNEL_CACHE="/tmp/kernel-store-51-$engine" PYTHONPATH="$site" python3 \
        bench/service_bench.py --out "$out/service-$engine" --repeats 3 --in-flight 64 \
        --per-gpu 4 --warm 0 --single 0 --deadline-s "${SERVICE_DEADLINE_S:-150}" \
        --tasks $SERVICE_TASKS 2>&1 | grep -v "^ERROR\|^Traceback\|^  File\|^    " \
        | grep "evaluations per GPU-minute\|mean seconds\|mean round-trip\|overlap"
    done
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam \
      --deadline-s "${REDTEAM_DEADLINE_S:-100}" --exploits correct_only_when_checked \
      skip_a_sliver_when_timed wrong_in_the_last_element cache_by_pointer skip_half_the_calls \
      2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  52)
    # Both sides' graphs captured at once: issue 13's rate and latencies (the service with its
    # stages, single requests, `aka eval --service`); no serial pass (steps 45 and 46 compared
    # the same solutions' service scores with serial ones), so that it fits a short call.
    AKA_KERNEL_CACHE=/tmp/kernel-store-52 python3 bench/service_bench.py --out "$out/service" \
      --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --single 2 --single-gap 6 \
      --deadline-s "${SERVICE_DEADLINE_S:-170}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    ;;
  53)
    # Step 52 from a warm kernel store (every task once through the service first, not counted),
    # short enough for a call of about four minutes: the rate alone.
    AKA_KERNEL_CACHE=/tmp/kernel-store-53 python3 bench/service_bench.py --out "$out/service" \
      --repeats 2 --in-flight 64 --per-gpu 4 --warm 0 --single 0 --warm-pass \
      --deadline-s "${SERVICE_DEADLINE_S:-110}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,14p
    ;;
  54)
    # Where the GPU-locked seconds go, every phase by step (the compile and correctness phases'
    # steps, the timing phase's own stages besides its cases'): the service from a warm kernel
    # store, then the judge profiled on two tasks.
    AKA_KERNEL_CACHE=/tmp/kernel-store-54 python3 bench/service_bench.py --out "$out/service" \
      --repeats 2 --in-flight 64 --per-gpu 4 --warm 0 --single 0 --warm-pass \
      --deadline-s "${SERVICE_DEADLINE_S:-130}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,24p
    AKA_KERNEL_CACHE=/tmp/kernel-store-54 python3 bench/judge_profile.py --out "$out/profile" \
      --top 80 triton2triton/softmax torch2triton/cross_entropy >/dev/null 2>&1
    grep -h "end to end\|^phases\|^judge stages\|^judge block" "$out"/profile/profile.md
    ;;
  55)
    # A/B on one machine, each engine from a warm kernel store and a warmed service: less judge
    # work per evaluation (one estimate block per side, one round trip per slot set-up, a block's
    # audits read at once, the baseline's inputs judged by its outputs, one nvidia-smi run per
    # reading) against the judge before it (.whl-old: OLD=fe1121c), new first.
    ab_service OLD=fe1121c 2 "${SERVICE_DEADLINE_S:-120}" || exit 2
    ;;
  56)
    # Step 55's new engine alone, for a call too short for both (about four minutes): the rate
    # from a warm kernel store with every phase by step, then two exploits the audits catch.
    service_then_exploits "${SERVICE_DEADLINE_S:-70}" "${REDTEAM_DEADLINE_S:-45}" \
      wrong_in_the_last_element skip_a_sliver_when_timed
    ;;
  57)
    # The judge profiled (cProfile, its .prof files brought back for pstats) on six tasks of
    # every kind: where the GPU-locked seconds of the audits, the waits and the correctness
    # phase go on the host. Each task once to warm the kernel store, then profiled.
    tasks="triton2triton/softmax torch2triton/cross_entropy triton2triton/gemm_bf16
      cuda2cuda/transpose triton2triton/layer_norm torch2cuda/fused_add_rms_norm"
    AKA_KERNEL_CACHE=/tmp/kernel-store-57 python3 bench/judge_profile.py --out "$out/warm" \
      $tasks >/dev/null 2>&1
    AKA_KERNEL_CACHE=/tmp/kernel-store-57 python3 bench/judge_profile.py --out "$out/profile" \
      --top 60 $tasks >/dev/null 2>&1
    grep -h "end to end\|^phases\|^judge stages\|^judge block" "$out"/profile/profile.md
    ;;
  58)
    # Steps 56 and 57 in one call (about six minutes): the service from a warm kernel store with
    # every phase by step, two audit exploits, then the judge profiled on six tasks.
    OUT="$out" bash bench/device_steps.sh 56
    OUT="$out" bash bench/device_steps.sh 57
    ;;
  59)
    # A/B on one machine, each engine from a warm kernel store and a warmed service, new first:
    # each timed audit's flag from one kernel launch (raised flags settled by PyTorch's), and a
    # killed runner's exit waking the judge (pidfd), against the judge before them (.whl-old:
    # OLD=c76bcff). Then the audit exploits against the new engine.
    ab_service OLD=c76bcff 1 "${SERVICE_DEADLINE_S:-70}" || exit 2
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam \
      --deadline-s "${REDTEAM_DEADLINE_S:-120}" --exploits nan_in_a_sliver_when_timed \
      off_by_most_of_the_bound_when_timed wrong_in_the_last_element skip_a_sliver_when_timed \
      cache_by_pointer correct_only_when_checked skip_half_the_calls \
      2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  60)
    # Step 59's new engine alone, for a call of about four minutes: the rate with every phase by
    # step and the audits' flags counted, then four exploits the audits must catch (two of them
    # aimed at the flag kernel: NaN, and the relative-L2 bound).
    service_then_exploits "${SERVICE_DEADLINE_S:-60}" "${REDTEAM_DEADLINE_S:-80}" \
      nan_in_a_sliver_when_timed off_by_most_of_the_bound_when_timed skip_a_sliver_when_timed \
      wrong_in_the_last_element
    ;;
  61)
    # Whether other processes' CUDA contexts (made by the evaluations started ahead, torn down
    # by those ending) slow the locked evaluation's driver calls (12-06i: setups of 0.2-0.9 s
    # on a few evaluations, 0.005-0.05 s on most); then four audit exploits (the L2 one with
    # its shift in its own kernel), then the service for what time is left.
    timeout 100 python3 bench/driver_contention_probe.py --out "$out/driver/probe.json" 2>&1 \
      | tail -80
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 80 \
      --exploits off_by_most_of_the_bound_when_timed nan_in_a_sliver_when_timed \
      skip_a_sliver_when_timed wrong_in_the_last_element 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
      --out "$out/service" --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 --single 0 \
      --warm-pass --deadline-s "${SERVICE_DEADLINE_S:-60}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,32p
    ;;
  62)
    # The driver probe (step 61's), then the service with no CPUs kept for the GPU's holder and
    # with four (``aka serve --holder-cpus``: 0, then 4), one after the other on one
    # machine, each from a warm kernel store and a warmed service; then two audit exploits.
    # NO_PROBE=1, NO_EXPLOITS=1: the A/B alone (about five minutes).
    [ -n "${NO_PROBE:-}" ] || timeout 100 python3 bench/driver_contention_probe.py \
      --out "$out/driver/probe.json" 2>&1 | tail -40
    keep="evaluations per GPU-minute\|mean seconds\|GPU-locked\|warm pass\|holder CPUs"
    keep="$keep\|set-up and capture\|block steps\|stages"
    for cpus in 0 4; do
      echo "== holder CPUs: $cpus"
      AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
        --out "$out/service-holder-$cpus" --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 \
        --single 0 --warm-pass --deadline-s "${SERVICE_DEADLINE_S:-60}" --tasks $SERVICE_TASKS \
        --holder-cpus "$cpus" 2>&1 \
        | grep -v "^ERROR\|^Traceback\|^  File\|^    " | grep "$keep"
    done
    [ -n "${NO_EXPLOITS:-}" ] || python3 bench/gpu_bench.py --out "$out/redteam" \
      --sections redteam --deadline-s 60 --exploits off_by_most_of_the_bound_when_timed \
      nan_in_a_sliver_when_timed 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  63)
    # A short call (about two minutes): the runners under their seccomp filter on the GPU (five
    # exploits, three of them reaching for the judge's process), then the driver probe with
    # shorter phases.
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 50 \
      --exploits $SANDBOX_EXPLOITS 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    timeout 70 python3 bench/driver_contention_probe.py --seconds 4 \
      --out "$out/driver/probe.json" 2>&1 | tail -40
    ;;
  64)
    # Steps 62 and 63 in one call (about six minutes), for days when machines are hard to get:
    # the sandbox's tests on this machine's kernel and CPUs (some skip where root lacks
    # CAP_SYS_RESOURCE, as on the CPU machines), the service with holder CPUs 0 and 4 side by
    # side (every evaluation's runners under the seccomp filter), then five exploits, three of
    # them reaching for the judge's process (last: a call cut short still brings the A/B).
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      tests/evaluation/test_holder_cpus.py tests/evaluation/test_oom_score.py 2>&1 | tail -8
    NO_PROBE=1 NO_EXPLOITS=1 OUT="$out" bash bench/device_steps.sh 62
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 50 \
      --exploits $SANDBOX_EXPLOITS 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  65)
    # The shortest check of the runners under their seccomp filter and scheduling limits on a
    # GPU (about two minutes): the sandbox's tests on this kernel, two stored solutions judged
    # (one Triton, one CUDA), then five exploits: three reach for the judge's process, one raises
    # its own scheduling.
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      tests/evaluation/test_holder_cpus.py tests/evaluation/test_oom_score.py 2>&1 | tail -8
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 40 \
      --tasks triton2triton/gelu cuda2cuda/transpose 2>&1 | tail -12
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 50 \
      --exploits $SANDBOX_EXPLOITS 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  66)
    # The shortest check of the sandbox on a GPU (about two minutes): its tests on this kernel
    # (the memory watch's too), two stored solutions judged (Triton, CUDA) with what each side
    # held of the host's memory, whether pinned memory is counted, whether a confined agent
    # keeps the GPU, then the memory, process, System V and disk exploits and one seccomp
    # exploit.
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_oom_score.py \
      tests/evaluation/test_seccomp.py tests/evaluation/test_memory_watch.py 2>&1 | tail -6
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 40 \
      --tasks triton2triton/gelu cuda2cuda/transpose 2>&1 | tail -12
    python3 - "$out/replay/bench.json" <<'PY'
import json, sys
for task, row in json.load(open(sys.argv[1])).get("replay", {}).items():
    print("host memory", task, json.dumps(row.get("memory")))
PY
    timeout 60 python3 bench/pinned_memory_probe.py 2>&1 | tail -20
    timeout 60 python3 bench/agent_sandbox_gpu_probe.py 2>&1 | tail -4
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 100 \
      --exploits hide_from_the_oom_killer hide_memory_in_a_memfd spawn_a_thousand_processes \
      spawn_nine_thousand_threads leave_shared_memory_behind fill_the_disk limit_the_judge \
      exit_after_its_answer open_seventy_thousand_files 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  68)
    # The runners' filter without sockets, io_uring, secret memory or message queues on a GPU
    # (about three minutes): its tests on this kernel, what CUDA asks of sockets unconfined
    # (where strace is installed), stored solutions of each kind judged under it, then the
    # exploits that hide memory files where the memory watch cannot see them.
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      tests/evaluation/test_memory_watch.py 2>&1 | tail -4
    if command -v strace >/dev/null; then
      timeout 60 strace -f -e trace=socket,socketpair,connect,io_uring_setup,mq_open \
        python3 -c "import torch; x = torch.ones(1 << 20, device='cuda'); print(float(x.sum()))" \
        2>&1 | grep -v "^+++\|^---" | tail -12
    else
      echo "no strace on this host"
    fi
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 90 \
      --tasks triton2triton/gelu cuda2cuda/transpose torch2cuda/layer_norm \
      torch2triton/gemm_bias_gelu torch2triton/attention_decode_gqa torch2cuda/softmax_rows \
      2>&1 | tail -14
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 100 \
      --exploits hide_memory_in_flight hide_memory_on_the_judges_socket \
      hide_memory_in_an_io_uring hide_memory_in_a_memfd limit_the_judge 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  69)
    # What the CUDA driver asks of sockets while it starts, and which refusals it survives
    # (about a minute).
    timeout 240 python3 bench/cuda_socket_probe.py 2>&1 | tail -20
    ;;
  70)
    # The exploits that queue memory files on the judge's descriptor socket, at import and from
    # a call (after an arena's descriptor went that way), about a minute.
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 100 \
      --exploits hide_memory_on_the_judges_socket hide_memory_on_the_judges_socket_when_called \
      2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  67)
    # Issue 13's service figure with the service's defaults (holder CPUs kept where the host
    # has enough), from a warm kernel store after a warm pass (about 150 s).
    keep="evaluations per GPU-minute\|GPU-locked\|warm pass\|holder CPUs\|mean seconds per"
    AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
      --out "$out/service" --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 --single 0 \
      --warm-pass --deadline-s "${SERVICE_DEADLINE_S:-60}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | grep "$keep"
    ;;
  71)
    # Issue 13's whole table on the code as it stands: serial `aka eval` of the 16 (which builds
    # the kernel store), 64 in flight through `aka serve` three times, single requests and
    # `aka eval --service`, and every service CI against the serial one (about 480 s).
    AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
      --out "$out/service" --repeats 3 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 \
      --single-gap 6 --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    python3 bench/placement_histogram.py "$out/service/bench.json" 2>&1 | tail -8
    ;;
  72)
    # The filter without keyrings, spliced pages or namespaces (clone3 answered ENOSYS), the
    # watches that count mapped memory files and deleted files, and sides imported from their
    # source only, on a GPU (about four minutes): the filter's and watches' tests on this
    # kernel, stored solutions of each kind judged under it, the e2e stored solution, then the
    # exploits against the new refusals and counts.
    timeout 90 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      tests/evaluation/test_memory_watch.py tests/evaluation/test_disk_watch.py 2>&1 | tail -4
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 90 \
      --tasks triton2triton/gelu cuda2cuda/transpose torch2cuda/layer_norm \
      torch2triton/gemm_bias_gelu torch2triton/attention_decode_gqa torch2cuda/softmax_rows \
      2>&1 | tail -14
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 120 \
      --exploits hide_memory_in_a_mapped_memfd hide_memory_in_a_pipe \
      hide_memory_in_network_namespaces leave_a_note_in_a_keyring fill_the_disk_through_mappings \
      hide_memory_in_a_memfd user_namespace_escape 2>&1 \
      | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  73)
    # Step 71 with one service run instead of three (about 300 s): serial `aka eval` of the 16,
    # 64 in flight through `aka serve`, single requests, every service CI against the serial one.
    AKA_KERNEL_CACHE="/tmp/kernel-store-$step" python3 bench/service_bench.py \
      --out "$out/service" --repeats 1 --in-flight 64 --per-gpu 4 --warm 0 --serial --single 4 \
      --single-gap 6 --deadline-s "${SERVICE_DEADLINE_S:-150}" --tasks $SERVICE_TASKS 2>&1 \
      | grep -v "^ERROR\|^Traceback\|^  File\|^    " | sed -n 1,60p
    ;;
  74)
    # Nothing a runner starts leaves its process group (setsid and setpgid do nothing), on a
    # GPU (about three minutes): the filter's tests on this kernel, stored solutions of each
    # kind judged under it (CUDA builds whose tools start sessions of their own), then the
    # exploits that leave processes behind, the hopper among them.
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      2>&1 | tail -4
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 90 \
      --tasks triton2triton/gelu cuda2cuda/transpose torch2cuda/layer_norm \
      torch2triton/gemm_bias_gelu torch2triton/attention_decode_gqa torch2cuda/softmax_rows \
      2>&1 | tail -14
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 90 \
      --exploits hop_past_the_kill leave_processes daemon_survives gpu_hog_daemon \
      spawn_a_thousand_processes kill_itself 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  75)
    # Step 74 on the code after it (the group killed after the runner's own exit, the strays'
    # collector, the checked side replies, Triton's driver utilities built in the runner's own
    # folder, the core-dump limit kept at 1), with the host's core_pattern, the filter's tests,
    # six stored solutions and the exploits that leave processes behind or crash (about 3 min).
    echo "core_pattern: $(cat /proc/sys/kernel/core_pattern)"
    timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/evaluation/test_seccomp.py \
      2>&1 | tail -4
    python3 bench/gpu_bench.py --out "$out/replay" --sections replay --deadline-s 90 \
      --tasks triton2triton/gelu cuda2cuda/transpose torch2cuda/layer_norm \
      torch2triton/gemm_bias_gelu torch2triton/attention_decode_gqa torch2cuda/softmax_rows \
      2>&1 | tail -14
    python3 bench/gpu_bench.py --out "$out/redteam" --sections redteam --deadline-s 90 \
      --exploits hop_past_the_kill hop_past_the_kill_after_exiting crash_into_the_hosts_core_helper \
      forge_the_failing_line forge_facts_that_are_not_a_mapping leave_processes daemon_survives \
      gpu_hog_daemon 2>&1 | grep --line-buffered "redteam\|INCOMPLETE"
    ;;
  *) echo "step 1 to 75" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# One GPU call of bench/device_steps.sh that always brings its results back: the step runs under
# its own time limit (below the device call's), its output is logged, and everything it wrote is
# packed into one file under $OUT (a call brings back few files, and none if it is cut first).
# Use, as the device machine's command (with .whl carried):
#   bash bench/device_call.sh STEP [LIMIT_S]      # LIMIT_S: default 540
set -u
step="${1:?usage: bench/device_call.sh STEP [LIMIT_S]}"
limit="${2:-540}"
dest="${OUT:?OUT names the folder the device call brings back}"
work=$(mktemp -d /tmp/aka-step-XXXX)
OUT="$work" timeout --kill-after=10 "$limit" bash bench/device_steps.sh "$step" 2>&1 \
  | tee "$work/log.txt"
echo "step $step: exit ${PIPESTATUS[0]} (124: cut at ${limit} s)" | tee -a "$work/log.txt"
tar czf "$dest/step$step.tgz" -C "$work" .
tail -c 4000 "$work/log.txt"

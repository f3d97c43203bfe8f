#!/usr/bin/env bash
# CI: make a docker engine and the CI image ready for the docker executor's tests.
#
#   1. installs Debian's docker.io and debootstrap (apt-get) when dockerd or debootstrap is missing;
#   2. starts dockerd in the background when no engine answers: without systemd and without
#      iptables (--iptables=false --bridge=none: containers get network none or host, which is
#      all the tests and the offline image build use); storage driver overlay2, else vfs;
#   3. builds the CI image aka-ci:latest from this checkout (images/build.sh ci: a debootstrap'd
#      Debian base, made once and kept, plus PyTorch's CPU build, Triton and aka).
#
# Idempotent: an engine that answers is used as it is; packages and the base image are kept.
# Needs root. Prints the time of each step. dockerd's log: $AKA_DOCKERD_LOG
# (default /var/log/aka-dockerd.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS
say() { printf '[docker-setup %4ss] %s\n' "$((SECONDS - started))" "$*" >&2; }
die() { echo "docker-setup: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts dockerd)"

if ! command -v dockerd > /dev/null || ! command -v debootstrap > /dev/null; then
  say "installing docker.io and debootstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q > /dev/null
  apt-get install -y -q --no-install-recommends docker.io debootstrap > /dev/null
fi
say "$(dockerd --version)"

engine_up() { docker info > /dev/null 2>&1; }

if engine_up; then
  say "a docker engine already answers at ${DOCKER_HOST:-unix:///var/run/docker.sock}"
else
  log="${AKA_DOCKERD_LOG:-/var/log/aka-dockerd.log}"
  for driver in overlay2 vfs; do
    say "starting dockerd (storage driver $driver; log $log)"
    nohup dockerd --iptables=false --bridge=none --storage-driver="$driver" > "$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
      engine_up && break
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.5
    done
    engine_up && break
    say "dockerd did not come up with $driver:"
    tail -n 15 "$log" >&2 || true
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  engine_up || die "dockerd did not start (log: $log)"
  say "dockerd is up (pid $pid)"
fi

images/build.sh ci
say "ready: $(docker image inspect --format '{{.RepoTags}} {{.Size}} bytes' aka-ci:latest)"

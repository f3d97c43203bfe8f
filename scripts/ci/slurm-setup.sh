#!/usr/bin/env bash
# Start a one-node Slurm cluster on this machine, for the tests of aka-executor-slurm.
#
# Installs Debian's slurm-wlm and munge, writes /etc/slurm/slurm.conf for one node (this host,
# its CPUs and memory as `slurmd -C` reports them, partition `debug`) and /etc/slurm/gres.conf with
# two fake GPUs (gpu:2, File=/dev/fakegpu0 and /dev/fakegpu1: character devices with the numbers
# of /dev/null, so nothing can use them; Slurm only needs them to exist to hand them out and to
# set CUDA_VISIBLE_DEVICES). Then starts munged, slurmctld and slurmd and waits until `sinfo`
# shows the node idle.
#
# Run as root on a machine without systemd services for Slurm (a CI runner, a container). Safe to
# run again: it keeps the munge key, rewrites the configs and restarts the Slurm daemons only if
# a config changed or a daemon is not answering. Prints the time each step took.
#
#   scripts/ci/slurm-setup.sh            # set up and start
#   scripts/ci/slurm-setup.sh --stop     # stop the daemons it started
set -euo pipefail

[ "$(id -u)" -eq 0 ] || { echo "slurm-setup: run as root" >&2; exit 1; }

CONF_DIR=/etc/slurm
RUN_DIR=/run/slurm
SPOOL=/var/spool/slurm
LOG_DIR=/var/log/slurm
START=$(date +%s.%N)
STEP_START=$START

step() {  # step NAME: print how long the previous step took, start timing the next
  local now
  now=$(date +%s.%N)
  awk -v a="$STEP_START" -v b="$now" -v n="$1" 'BEGIN { printf "slurm-setup: %-28s %6.1f s\n", n, b - a }'
  STEP_START=$now
}

stop_pidfile() {  # stop_pidfile FILE: stop the daemon whose pid FILE holds, wait until it is gone
  local file=$1 pid
  [ -s "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$file"
}

if [ "${1:-}" = "--stop" ]; then
  stop_pidfile "$RUN_DIR/slurmd.pid"
  stop_pidfile "$RUN_DIR/slurmctld.pid"
  munged --stop 2>/dev/null || true
  echo "slurm-setup: stopped"
  exit 0
fi

# --------------------------------------------------------------------------- packages
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi
step "packages"

# --------------------------------------------------------------------------- munge
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  munged --stop 2>/dev/null || true
  runuser -u munge -- munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null
fi
step "munged"

# --------------------------------------------------------------------------- configs
HOST=$(hostname -s)
# CPUs, sockets, cores, threads and memory as slurmd detects them, so that slurmd agrees with
# the config; a little memory is kept back for the daemons.
read -r -a NODE_FACTS <<<"$(slurmd -C | head -n 1 | cut -d' ' -f2-)"
NODE_LINE=""
for fact in "${NODE_FACTS[@]}"; do
  case $fact in
    RealMemory=*) NODE_LINE+=" RealMemory=$(( ${fact#RealMemory=} * 9 / 10 ))" ;;
    *) NODE_LINE+=" $fact" ;;
  esac
done

changed=0
for i in 0 1; do
  # Fake GPUs: character devices with /dev/null's numbers. A plain file is not enough: slurmd
  # logs "not a valid character or block device" and jobs then get no CUDA_VISIBLE_DEVICES.
  if [ ! -c "/dev/fakegpu$i" ]; then
    rm -f "/dev/fakegpu$i"
    mknod -m 0666 "/dev/fakegpu$i" c 1 3
    changed=1
  fi
done

mkdir -p "$CONF_DIR" "$RUN_DIR" "$SPOOL/ctld" "$SPOOL/d" "$LOG_DIR"
NEW_CONF=$(cat <<EOF
# Written by aka's scripts/ci/slurm-setup.sh: a one-node test cluster on this host.
ClusterName=aka-ci
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
NodeName=$HOST$NODE_LINE Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
)
NEW_GRES="NodeName=$HOST Name=gpu File=/dev/fakegpu[0-1]"

if [ "$(cat "$CONF_DIR/slurm.conf" 2>/dev/null)" != "$NEW_CONF" ]; then
  printf '%s\n' "$NEW_CONF" >"$CONF_DIR/slurm.conf"
  changed=1
fi
if [ "$(cat "$CONF_DIR/gres.conf" 2>/dev/null)" != "$NEW_GRES" ]; then
  printf '%s\n' "$NEW_GRES" >"$CONF_DIR/gres.conf"
  changed=1
fi
# Debian ships plugstack.conf including plugstack.conf.d/*; keep it (pyxis would go there).
step "configs (changed=$changed)"

# --------------------------------------------------------------------------- daemons
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "$changed" = 1 ] || ! running "$RUN_DIR/slurmctld.pid" || ! scontrol ping >/dev/null 2>&1; then
  stop_pidfile "$RUN_DIR/slurmd.pid"
  stop_pidfile "$RUN_DIR/slurmctld.pid"
  slurmctld
  for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
  scontrol ping >/dev/null || { tail -n 30 "$LOG_DIR/slurmctld.log" >&2; exit 1; }
fi
step "slurmctld"

if ! running "$RUN_DIR/slurmd.pid"; then
  slurmd
fi
step "slurmd"

# --------------------------------------------------------------------------- wait for the node
state=""
for _ in $(seq 300); do
  state=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null || true)
  case $state in
    idle|mixed|allocated) break ;;
    drain*|down*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.2
done
case $state in
  idle|mixed|allocated) ;;
  *)
    echo "slurm-setup: node $HOST is '$state', not idle; logs follow" >&2
    tail -n 30 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2
    exit 1 ;;
esac
step "node $state"

sinfo -N -o '%N %P %T %c %m %G'
awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "slurm-setup: %-28s %6.1f s\n", "total", b - a }'

#!/usr/bin/env bash
# A real Slurm 22.05 cluster on this machine for gpuvet's slurm backend tests (docs/slurm.md,
# "Testing"): Debian's munge, slurmctld and slurmd, no GPU needed.
#
#   start    munged, slurmctld on 127.0.0.1, and $NODES slurmd (default 3: node1..nodeN), each
#            advertising 8 GPUs through gres (gpu:8, Count without File: slurmd needs no device)
#   stop     every daemon it started (and every job's process with its node), its state folder
#   status   the daemons, sinfo and squeue
#   env      the variables a client needs (SLURM_CONF), for eval
#   kill-node NAME   the node dies: its slurmd and every job process on it, at once (SIGKILL)
#   start-node NAME  it comes back (ReturnToService=2: idle again once its slurmd registers)
#
# Each slurmd is one node: a UTS namespace of its own (the node's host name, which is how slurmd
# knows which node it is: Debian builds slurmd without --enable-multiple-slurmd, so -N is not
# there) and a PID namespace of its own (`kill-node NAME` stops the node with every job process
# on it at once, as a node that dies). They share the host's network namespace and reach each
# other on loopback, each slurmd on a port of its own: a slurmd in a network namespace of its own
# would need a veth pair with non-loopback addresses in the root namespace to reach slurmctld (and
# gpuvet's clients slurmctld from there), and this machine's tests send traffic to loopback only.
# All nodes share this machine's file system, as a real cluster's shared home or /scratch.
#
# State: $GPUVET_SLURM_DIR (default /tmp/gpuvet-slurm). Needs root and the packages
# (apt-get install slurmctld slurmd slurm-client munge); without them it says so and exits 1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/pidfile.sh"   # pid_is, stop_pid
D=${GPUVET_SLURM_DIR:-/tmp/gpuvet-slurm}
NODES=${NODES:-3}
GPUS=${GPUS:-8}
PORT_CTLD=${SLURM_TEST_PORT:-16817}   # slurmctld; node i's slurmd listens on PORT_CTLD+i
CONF=$D/etc/slurm.conf
export SLURM_CONF=$CONF

die() { echo "slurm-test-env: $*" >&2; exit 1; }
need() {
  [ "$(id -u)" = 0 ] || die "needs root (namespaces, munged's key, slurmd)"
  for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sinfo /usr/bin/unshare; do
    [ -x "$b" ] || die "no $b: apt-get install slurmctld slurmd slurm-client munge"
  done
}

write_conf() {
  mkdir -p "$D/etc" "$D/ctld" "$D/log" "$D/run" "$D/munge"
  local nodes="node[1-$NODES]"
  cat > "$CONF" <<CONF
# gpuvet's Slurm test cluster (scripts/slurm-test-env.sh); not for production.
ClusterName=gpuvet-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$PORT_CTLD
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.sock
StateSaveLocation=$D/ctld
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdTimeout=20
SlurmctldTimeout=20
MessageTimeout=10
KillWait=5
MinJobAge=600
InactiveLimit=0
# slurmd runs $D/healthcheck.sh on each node every 5 s; it runs the node's own check when a test
# put one at healthcheck.d/NODE (gpuvet health --slurm-drain), else passes.
HealthCheckProgram=$D/healthcheck.sh
HealthCheckInterval=5
HealthCheckNodeState=ANY
# slurmd runs $D/prolog.sh before each job on its node: the node's own prolog.d/NODE when a test
# put one there (gpuvet health --slurm-drain), else passes. A failing Prolog drains the node and
# requeues the job.
Prolog=$D/prolog.sh
CONF
  mkdir -p "$D/healthcheck.d" "$D/prolog.d"
  for hook in healthcheck prolog; do
    cat > "$D/$hook.sh" <<HC
#!/bin/sh
n=\$(hostname)
[ -x "$D/$hook.d/\$n" ] && exec "$D/$hook.d/\$n"
exit 0
HC
    chmod 755 "$D/$hook.sh"
  done
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=node$i NodeAddr=127.0.0.1 Port=$((PORT_CTLD + i)) CPUs=2 RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN" >> "$CONF"
  done
  echo "PartitionName=gpu Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE" >> "$CONF"
  echo "PartitionName=debug Nodes=node1 MaxTime=INFINITE State=UP" >> "$CONF"
  # The nodes have no /dev/nvidia*: each GPU is a character device standing in for its own (the
  # numbers of /dev/null; slurmd only stats it, and with ConstrainDevices off nothing binds it).
  mkdir -p "$D/dev"
  for g in $(seq 0 $((GPUS - 1))); do mknod "$D/dev/nvidia$g" c 1 3; done
  echo "AutoDetect=off" > "$D/etc/gres.conf"
  echo "NodeName=node[1-$NODES] Name=gpu File=$D/dev/nvidia[0-$((GPUS - 1))]" >> "$D/etc/gres.conf"
  echo "ConstrainDevices=no" > "$D/etc/cgroup.conf"
}

# start_node NAME: one slurmd in a UTS namespace (its host name is the node's name, which is how
# slurmd knows which node it is) and a PID namespace of its own (--kill-child: when unshare goes,
# the namespace's init and with it every process of the node go), with its own /proc (a mount
# namespace: slurmstepd's proctrack/linuxproc finds a job's processes there, to signal them on
# scancel; the host's /proc would show it pids of another namespace).
start_node() {
  mkdir -p "$D/spool/$1"
  setsid unshare --uts --pid --mount --mount-proc --fork --kill-child sh -c "hostname $1; exec /usr/sbin/slurmd -D -f '$CONF'" \
    > "$D/log/slurmd-$1.out" 2>&1 < /dev/null &
  echo $! > "$D/run/$1.unshare"
}

pidalive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  need
  pidalive "$D/run/slurmctld.pid" && die "already running ($D); stop it first"
  local t0=$SECONDS
  rm -rf "$D"; write_conf
  # munge: a fresh key, its own socket (no system munged needed).
  dd if=/dev/urandom bs=1 count=1024 of="$D/munge/munge.key" status=none
  chmod 700 "$D/munge"; chmod 400 "$D/munge/munge.key"
  /usr/sbin/munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" \
    --pid-file="$D/run/munged.pid" --log-file="$D/log/munged.log" --seed-file="$D/munge/seed"
  for _ in $(seq 50); do [ -S "$D/munge/munge.sock" ] && break; sleep 0.1; done
  [ -S "$D/munge/munge.sock" ] || die "munged did not start: $(tail -5 "$D/log/munged.log")"
  /usr/sbin/slurmctld -f "$CONF" -i
  for i in $(seq 1 "$NODES"); do start_node "node$i"; done
  local ok=
  for _ in $(seq 150); do
    if [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -cE ' (idle|alloc|mix)$')" -ge "$NODES" ]; then ok=1; break; fi
    sleep 0.2
  done
  [ -n "$ok" ] || { sinfo -N 2>&1 | head; tail -5 "$D/log/slurmctld.log"; die "the nodes did not come up in 30 s"; }
  echo "slurm test cluster up in $((SECONDS - t0)) s: $NODES nodes x gpu:$GPUS; SLURM_CONF=$CONF"
}

kill_node() {
  local n=$1 f="$D/run/$1.unshare"
  [ -f "$f" ] || die "no node $n"
  local pid; pid=$(cat "$f"); rm -f "$f"
  pid_is "$pid" unshare || return 0 # gone already, and its pid perhaps another process's now
  # unshare's child is the namespace's init (--kill-child): killing it kills every process of the node.
  pkill -KILL -P "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  [ -d "$D" ] || return 0
  export SLURM_CONF=$CONF
  for f in "$D"/run/node*.unshare; do [ -f "$f" ] || continue; n=$(basename "$f" .unshare); kill_node "$n"; done
  stop_pid "$D/run/slurmctld.pid" /usr/sbin/slurmctld 5
  stop_pid "$D/run/munged.pid" /usr/sbin/munged 5
  rm -rf "$D"
  echo "slurm test cluster stopped"
}

status() {
  [ -f "$CONF" ] || { echo "not started"; return 1; }
  for p in slurmctld munged; do pidalive "$D/run/$p.pid" && echo "$p: running" || echo "$p: not running"; done
  sinfo -N -o '%N %t %G %P' || true
  squeue || true
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  kill-node) kill_node "${2:?node name}" ;;
  start-node) [ -f "$D/run/${2:?node name}.unshare" ] && die "$2 is running"; start_node "$2" ;;
  *) echo "usage: $0 start|stop|status|env|kill-node NODE|start-node NODE" >&2; exit 2 ;;
esac

#!/bin/bash
# cluster.sh {start|stop|exec CMD...|status}
# A control plane of its own for the scale harness (bench/k8sscale, docs/k8s-scale.md): etcd,
# kube-apiserver, controller-manager, scheduler and kwok as scripts/k8s-test-env.sh runs them, but
# inside a network namespace of its own ($NETNS, default gpuvet-scale), so its fixed ports
# (6443, 23790, 10247, …) never meet another control plane's in the root namespace. It starts
# with no node: the harness creates the kwok GPU nodes it needs (-nodes N).
#   start   the netns and the control plane (binaries from scripts/k8s-test-env.sh's build cache)
#   stop    the control plane and the netns
#   exec    run a command inside the netns (the kubeconfig: $WORK/run/kubeconfig)
# Needs root (ip netns), and `bash scripts/k8s-test-env.sh build` once.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
NETNS=${NETNS:-gpuvet-scale}
WORK=${WORK:-$HOME/.cache/k8s-scale}
SHARED_CP=${SHARED_CP:-$HOME/.cache/k8s-test/$K8S_VERSION}
CP_SCRIPT=$ROOT/scripts/k8s-test-env.sh

nsx() { nsenter --net=/run/netns/"$NETNS" "$@"; }

start() {
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
    [ -x "$SHARED_CP/bin/$b" ] || { echo "no $SHARED_CP/bin/$b: run \`bash scripts/k8s-test-env.sh build\` first"; exit 1; }
  done
  stop >/dev/null 2>&1 || true
  mkdir -p "$WORK/bin"
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do ln -sfn "$SHARED_CP/bin/$b" "$WORK/bin/$b"; done
  WORK=$WORK bash "$CP_SCRIPT" build > "$WORK/build.log" 2>&1 || { tail -5 "$WORK/build.log"; exit 1; }   # binaries found: kwok's stage files only
  [ -e /run/netns ] || echo new > "$WORK/netnsdir.created"
  ip netns add "$NETNS"
  nsx ip link set lo up
  # A thousand nodes' Jobs and pods: the controllers' API rate and Job workers raised from their
  # defaults (20 QPS, 5 Job syncs), as a large cluster's operators do; the apiserver as it comes.
  # kwok: a worker per node at once (--parallel-nodes 64) for pods, node stages and leases, where
  # its default of 4 for every node would be one fake kubelet for a thousand nodes.
  nsx env WORK="$WORK" NODES=0 KWOK_PARALLELISM="${KWOK_PARALLELISM:-64}" CM_ARGS="${CM_ARGS:---kube-api-qps=300 --kube-api-burst=600 --concurrent-job-syncs=50 --concurrent-gc-syncs=50}" \
    SCHED_ARGS="${SCHED_ARGS:---kube-api-qps=300 --kube-api-burst=600}" bash "$CP_SCRIPT" start > "$WORK/start.log" 2>&1 || { tail -10 "$WORK/start.log"; stop >/dev/null 2>&1; exit 1; }
  tail -1 "$WORK/start.log"
  echo "KUBECONFIG=$WORK/run/kubeconfig (inside netns $NETNS: $0 exec CMD)"
}

stop() {
  if [ -d "$WORK/run" ]; then WORK=$WORK bash "$CP_SCRIPT" stop || true; fi
  ip netns del "$NETNS" 2>/dev/null || true
  if [ -f "$WORK/netnsdir.created" ]; then rmdir /run/netns 2>/dev/null || true; rm -f "$WORK/netnsdir.created"; fi
}

status() {
  if ip netns list 2>/dev/null | grep -qw "$NETNS" && nsx curl -skf -m 5 -H 'Authorization: Bearer testtoken' https://127.0.0.1:6443/readyz >/dev/null; then
    echo "running in netns $NETNS; KUBECONFIG=$WORK/run/kubeconfig"
  else
    echo "not running"; return 1
  fi
}

case "${1:-}" in
  start|stop|status) "$1" ;;
  exec) shift; exec nsenter --net=/run/netns/"$NETNS" "$@" ;;
  *) echo "usage: $0 start|stop|status|exec CMD..." >&2; exit 2 ;;
esac

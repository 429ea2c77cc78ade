#!/bin/bash
# k8s-test-env.sh {build|start|stop}
# Builds (from the Go module proxy only) and runs a real control plane on 127.0.0.1 for gpuvet's
# Kubernetes integration tests (docs/kubernetes.md):
#   etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok (fake nodes/pods/PVs)
# Needs: go 1.26, openssl, curl. No Docker, no downloads outside the Go module proxy.
# gpuvet's settings on top of the plain control plane:
#   - pod IPs on loopback (KWOK_POD_CIDR, default 127.77.0.1/16): a test can serve an engine pod's
#     address with a local `gpuvet sim`;
#   - no "pod-complete" stage: the test's stand-in kubelet runs a Job pod's command locally and then
#     marks the pod Succeeded itself, after its log is in place;
#   - the Logs CRD enabled (KWOK_ENABLE_CRDS=Logs), so a pod's log can be pointed at a local file.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/pidfile.sh"   # stop_pid
K8S_VERSION=${K8S_VERSION:-v1.37.2}        # k8s.io/kubernetes; staging modules = v0.37.2
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}      # go.etcd.io/etcd/server/v3
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}       # sigs.k8s.io/kwok
WORK=${WORK:-$HOME/.cache/k8s-test/$K8S_VERSION}   # outside the clone, so CI on the same machine reuses binaries
KWOK_DEBUG_CONFIG=${KWOK_DEBUG_CONFIG:-}   # optional extra kwok --config file (ClusterPortForward/ClusterExec/ClusterLogs ...)
# kwok's workers for pod stages, node stages and node leases (its default: 4 of each, for every node
# it fakes, where a real cluster has a kubelet per node): the scale harness raises them (docs/k8s-scale.md)
KWOK_PARALLELISM=${KWOK_PARALLELISM:-}
KWOK_ENABLE_CRDS=${KWOK_ENABLE_CRDS:-Logs} # e.g. PortForward,ClusterPortForward,Exec,ClusterExec,Logs,ClusterLogs
KWOK_POD_CIDR=${KWOK_POD_CIDR:-127.77.0.1/16}
CM_ARGS=${CM_ARGS:-}                       # more kube-controller-manager flags (bench/k8sscale: its API rate, Job workers)
SCHED_ARGS=${SCHED_ARGS:-}                 # more kube-scheduler flags
BIN=$WORK/bin RUN=$WORK/run SRC=$WORK/src
KC=$RUN/kubeconfig
LDX="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo $K8S_VERSION | cut -d. -f2)"

build() {
  mkdir -p "$BIN" "$SRC/k8s" "$SRC/etcd"
  if [ ! -x "$BIN/kube-apiserver" ] || [ ! -x "$BIN/kube-controller-manager" ] || [ ! -x "$BIN/kube-scheduler" ]; then
    cd "$SRC/k8s"
    local gomod staging mods
    gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    staging="v0.${K8S_VERSION#v1.}"
    # k8s.io/kubernetes replaces its staging modules with ./staging/...; point them at the published v0.x tags
    mods=$(sed -n '/^replace (/,/^)/p' "$gomod" | awk '/=>/{print $1}' | grep -v -e sample-cli-plugin -e sample-controller)
    { printf 'module k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
      for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
      printf ')\n'; } > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' > tools.go
    go mod tidy
    go build -trimpath -ldflags="$LDX" -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  fi
  if [ ! -x "$BIN/etcd" ]; then
    cd "$SRC/etcd"
    printf 'module etcdbuild\n\ngo 1.26.0\n' > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && go mod tidy
    go build -trimpath -ldflags='-s -w' -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  fi
  if [ ! -x "$BIN/kwok" ]; then
    GOBIN="$BIN" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  fi
  local kd s
  kd=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  s=$kd/kustomize/stage
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml \
           volume/fast/pvc-provision.yaml volume/fast/pv-bind.yaml volume/fast/pv-delete.yaml volume/fast/pvc-delete.yaml; do
    echo '---'
    if [ "$f" = pod/fast/pod-ready.yaml ]; then
      # A pod with a readiness probe starts Running but not Ready, as on a real node: readiness is
      # the probe's to give (the tests' stand-in kubelet probes the engine and sets Ready itself).
      perl -0p -e 's/(\{\{ \$now := Now \}\}\n)/$1      {{ \$ready := "True" }}{{ range .spec.containers }}{{ if .readinessProbe }}{{ \$ready = "False" }}{{ end }}{{ end }}\n/;
    s/status: "True"\n(\s+)type: Ready\n/status: {{ \$ready | Quote }}\n$1type: Ready\n/;
    s/status: "True"\n(\s+)type: ContainersReady\n/status: {{ \$ready | Quote }}\n$1type: ContainersReady\n/;
    s/(containerStatuses:\n\s+\{\{ range .spec.containers \}\}\n(?:.*\n){2}\s+)ready: true/$1ready: {{ eq \$ready "True" }}/' "$s/$f"
    else cat "$s/$f"; fi
  done > "$BIN/gpuvet-kwok-stages.yaml"
  grep -q 'ready = "False"' "$BIN/gpuvet-kwok-stages.yaml" || { echo "kwok stage patch failed"; exit 1; }
  cp "$s/volume/fast/storage-class.yaml" "$BIN/kwok-storageclass.yaml"
  mkdir -p "$BIN/kwok-crds"   # CRDs for --enable-crds (kwok itself does not install them)
  for k in portforwards clusterportforwards execs clusterexecs logs clusterlogs; do
    cp "$kd/kustomize/crd/bases/kwok.x-k8s.io_$k.yaml" "$BIN/kwok-crds/"; done
  chmod u+w "$BIN"/kwok-crds/*.yaml
}

wait_ready() { # name pidfile url
  for _ in $(seq 1 600); do
    kill -0 "$(cat "$RUN/$2.pid")" 2>/dev/null || { echo "$1 died:"; tail -20 "$RUN/$2.log"; exit 1; }
    curl -skf -H 'Authorization: Bearer testtoken' "$3" >/dev/null && return 0
    sleep 0.1
  done
  echo "$1 not ready after 60s"; tail -20 "$RUN/$2.log"; exit 1
}

start() {
  rm -rf "$RUN"; mkdir -p "$RUN"; cd "$RUN"
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  echo 'testtoken,admin,admin-uid,system:masters' > tokens.csv
  local t0; t0=$(date +%s%3N)
  # --quota-backend-bytes: etcd's default quota (2 GiB) filled in two 1,000-node runs of the scale
  # harness (every pod and Job ~10 KB, every status change a new revision until the apiserver's
  # 5-minute compaction), and then etcd refuses every write and the cluster stops; 8 GiB is etcd's
  # suggested maximum, what large clusters run.
  "$BIN/etcd" --name test --data-dir "$RUN/etcd-data" --quota-backend-bytes=8589934592 \
    --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster test=http://127.0.0.1:23800 --unsafe-no-fsync --log-level=warn > etcd.log 2>&1 &
  echo $! > etcd.pid
  wait_ready etcd etcd http://127.0.0.1:23790/health
  echo "etcd ready: $(( $(date +%s%3N) - t0 )) ms"
  "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:23790 \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 --cert-dir="$RUN/pki" \
    --endpoint-reconciler-type=none --service-cluster-ip-range=10.0.0.0/24 \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$RUN/sa.pub" --service-account-signing-key-file="$RUN/sa.key" \
    --token-auth-file="$RUN/tokens.csv" --authorization-mode=RBAC --allow-privileged=true \
    --disable-admission-plugins=ServiceAccount \
    --kubelet-preferred-address-types=InternalIP > apiserver.log 2>&1 &
  echo $! > apiserver.pid
  cat > "$KC" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: testtoken}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
EOK
  wait_ready kube-apiserver apiserver https://127.0.0.1:6443/readyz
  echo "kube-apiserver ready: $(( $(date +%s%3N) - t0 )) ms"
  if [ -n "$KWOK_ENABLE_CRDS" ]; then   # must exist before kwok starts its informers
    for f in "$BIN"/kwok-crds/*.yaml; do
      curl -skf -H 'Authorization: Bearer testtoken' -H 'Content-Type: application/yaml' -X POST --data-binary @"$f" \
        https://127.0.0.1:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions >/dev/null; done
  fi
  local common=(--kubeconfig="$KC" --authentication-kubeconfig="$KC" --authorization-kubeconfig="$KC"
                --authentication-skip-lookup=true --bind-address=127.0.0.1 --leader-elect=false)
  "$BIN/kube-controller-manager" "${common[@]}" --secure-port=10257 \
    --service-account-private-key-file="$RUN/sa.key" --controllers='*,-nodeipam' $CM_ARGS > controller-manager.log 2>&1 &
  echo $! > controller-manager.pid
  "$BIN/kube-scheduler" "${common[@]}" --secure-port=10259 $SCHED_ARGS > scheduler.log 2>&1 &
  echo $! > scheduler.pid
  # --node-ip/--node-port: node-initialize stage writes status.addresses[InternalIP]=127.0.0.1 and
  # status.daemonEndpoints.kubeletEndpoint.Port=10247, so the apiserver reaches kwok as the "kubelet"
  # (HTTPS on the same port; kwok self-signs, apiserver skips verify when no --kubelet-certificate-authority)
  local kwok_opts=()
  if [ -n "$KWOK_PARALLELISM" ]; then   # a file of options leaves out kwok's defaults: the log server (debugging handlers) named again
    cat > "$RUN/kwok-options.yaml" <<EOK
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: {podPlayStageParallelism: $KWOK_PARALLELISM, nodePlayStageParallelism: $KWOK_PARALLELISM, nodeLeaseParallelism: $KWOK_PARALLELISM,
  enableDebuggingHandlers: true, enableProfilingHandler: true, podsOnNodeSyncParallelism: 1, enablePodsOnNodeSyncListPager: true}
EOK
    kwok_opts=(--config="$RUN/kwok-options.yaml")
  fi
  "$BIN/kwok" --kubeconfig="$KC" --config="$BIN/gpuvet-kwok-stages.yaml" "${kwok_opts[@]}" --cidr="$KWOK_POD_CIDR" ${KWOK_DEBUG_CONFIG:+--config="$KWOK_DEBUG_CONFIG"} \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address=127.0.0.1:10247 --node-ip=127.0.0.1 --node-port=10247 \
    ${KWOK_ENABLE_CRDS:+--enable-crds="$KWOK_ENABLE_CRDS"} --node-lease-duration-seconds=40 > kwok.log 2>&1 &
  echo $! > kwok.pid
  wait_ready kube-controller-manager controller-manager https://127.0.0.1:10257/healthz
  wait_ready kube-scheduler scheduler https://127.0.0.1:10259/healthz
  wait_ready kwok kwok http://127.0.0.1:10247/healthz
  # default StorageClass served by kwok, and one fake GPU node
  curl -skf -H 'Authorization: Bearer testtoken' -H 'Content-Type: application/yaml' \
    -X POST --data-binary @"$BIN/kwok-storageclass.yaml" https://127.0.0.1:6443/apis/storage.k8s.io/v1/storageclasses >/dev/null
  for i in $(seq 0 $(( ${NODES:-1} - 1 ))); do
    curl -skf -H 'Authorization: Bearer testtoken' -H 'Content-Type: application/yaml' -X POST \
      https://127.0.0.1:6443/api/v1/nodes --data-binary @- >/dev/null <<EON
apiVersion: v1
kind: Node
metadata:
  name: kwok-gpu-$i
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-gpu-$i, nvidia.com/gpu.present: "true", nvidia.com/gpu.product: NVIDIA-H200}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
  capacity:    {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
EON
  done
  echo "all started: $(( $(date +%s%3N) - t0 )) ms; KUBECONFIG=$KC"
}

stop() {
  local p
  for p in kwok:kwok scheduler:kube-scheduler controller-manager:kube-controller-manager apiserver:kube-apiserver etcd:etcd; do
    stop_pid "$RUN/${p%%:*}.pid" "$BIN/${p#*:}" 30
  done
}

case "${1:-}" in build|start|stop) "$1" ;; *) echo "usage: $0 build|start|stop" >&2; exit 2 ;; esac

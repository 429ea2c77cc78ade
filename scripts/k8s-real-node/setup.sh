#!/bin/bash
# setup.sh {build|images [GPUVET_BIN]|start|stop|status|exec CMD...|crictl ARGS...}
# A REAL Kubernetes node on this machine: kubelet v1.37.2 + containerd 1.6 (Debian) + runc, real
# containers from hand-built images (no registry), next to the loopback control plane of
# scripts/k8s-test-env.sh. Everything network-facing lives in a network namespace made here
# ($NETNS, default k8s-real): the control plane on its 127.0.0.1, the kubelet on a dummy address,
# pods on a bridge (cni0, 10.88.0.0/16) inside it. Nothing is routed out of it.
#   build   apt packages (containerd runc containernetworking-plugins), the control plane (its
#           cache, as k8s-test-env.sh builds it), kubelet + crictl (cached under $C/bin), pause, gpuvet's image
#   images  (re)build gpuvet's image from GPUVET_BIN (default: go build of $GPUVET_SRC) and import it
#   start   netns, control plane (NODES=0), containerd, kubelet; node $NODE with nvidia.com/gpu=$GPUS;
#           KUBE_PROXY=1 (build and start): kube-proxy in nftables mode, so pods reach Services' ClusterIPs
#   stop    everything started, pods' cgroups, mounts, the netns; the image cache stays in $C
#   exec    run a command inside the netns (clients: KUBECONFIG=$C/cp/run/kubeconfig)
#   crictl  crictl against the node's containerd
# Needs root, go 1.26, python3, curl, openssl. README.md next to this file: figures and gotchas;
# docs/kubernetes.md: what gpuvet's tests run on it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/../pidfile.sh"   # stop_pid
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
C=${K8S_REAL_CACHE:-$HOME/.cache/k8s-real}
BIN=$C/bin IMG=$C/images SRC=$C/src LOG=$C/logs ETC=$C/etc
CP_SCRIPT=${CP_SCRIPT:-$HERE/../k8s-test-env.sh}
SHARED_CP=${SHARED_CP:-$HOME/.cache/k8s-test/$K8S_VERSION}   # the control plane binaries (k8s-test-env.sh's default WORK)
CPW=$C/cp                                   # the control plane's own WORK: its run dir is ours, not k8s-test-env.sh's default one
KC=$CPW/run/kubeconfig
RUN=/run/k8s-real                           # containerd state and sockets (unix socket paths stay short)
VAR=$C/var                                  # containerd root, kubelet root dir, pod logs: wiped by stop
NETNS=${NETNS:-k8s-real}
NODE=${NODE:-real-gpu-0}
NODE_IP=10.89.0.1                           # on the netns's lo (the kubelet refuses a 127/8 node IP; no dummy links in this kernel)
POD_SUBNET=10.88.0.0/16
GPUS=${GPUS:-8}
GPU_PRODUCT=${GPU_PRODUCT:-NVIDIA-H200}
GPUVET_SRC=${GPUVET_SRC:-$PWD}   # run from the project root
IMAGE=${IMAGE:-gpuvet.local/gpuvet:dev}
PAUSE_IMAGE=gpuvet.local/pause:3.10
SOCK=$RUN/containerd.sock
CG=k8s-real                                 # cgroup (v1 hierarchies + unified) holding the pods
# The pods' CPU weight beside the machine's other work (cgroup v1 cpu.shares of $CG; 1024, one
# ordinary process's, when unset): .ci/run lowers it so that the pods yield to the tests it runs beside.
CPU_SHARES=${CPU_SHARES:-}
PVDIR=/tmp/kwok-local-path-provisioner      # where kwok's volume stage points its hostPath PVs
# fixed host paths the kubelet (legacy log links, device-plugin socket), libcni (result cache) and containerd's shims
# (sockets) use whatever the config says; stop removes those that start found missing
FIXED="/var/log/containers /var/lib/cni /run/containerd /var/lib/kubelet"
LDX="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo $K8S_VERSION | cut -d. -f2)"

nsx() { nsenter --net=/run/netns/$NETNS "$@"; }
api() { nsx curl -sk -m 10 -H 'Authorization: Bearer testtoken' -H "Content-Type: ${3:-application/json}" -X "$1" "https://127.0.0.1:6443$2" ${4:+--data-binary "$4"}; }
ms() { echo $(( $(date +%s%3N) - T0 )); }
alive() { [ -f "$1" ] && pid_is "$(cat "$1")" "$2"; } # FILE COMMAND: a stale file's pid may be anyone's now

build() {
  mkdir -p "$BIN" "$IMG" "$SRC" "$LOG"
  if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [ ! -x /usr/lib/cni/bridge ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins
  fi
  bash "$CP_SCRIPT" build                    # cache $SHARED_CP: ~10 min once per machine
  mkdir -p "$CPW/bin"
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do ln -sfn "$SHARED_CP/bin/$b" "$CPW/bin/$b"; done
  WORK=$CPW bash "$CP_SCRIPT" build          # binaries found: only writes kwok's stage files into $CPW/bin
  if [ ! -x "$BIN/kubelet" ]; then           # as k8s-test-env.sh builds the others: staging modules at v0.x
    mkdir -p "$SRC/kubelet"; cd "$SRC/kubelet"
    local gomod staging mods
    gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    staging="v0.${K8S_VERSION#v1.}"
    mods=$(sed -n '/^replace (/,/^)/p' "$gomod" | awk '/=>/{print $1}' | grep -v -e sample-cli-plugin -e sample-controller)
    { printf 'module kubeletbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
      for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
      printf ')\n'; } > go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n' > tools.go
    go mod tidy
    go build -trimpath -ldflags="$LDX" -o "$BIN/kubelet" k8s.io/kubernetes/cmd/kubelet
  fi
  if [ -n "${KUBE_PROXY:-}" ] && [ ! -x "$BIN/kube-proxy" ]; then   # optional: Services (ClusterIP) through nftables, ~40 s after the kubelet
    rm -rf "$SRC/kube-proxy"; mkdir -p "$SRC/kube-proxy"; cp "$SRC/kubelet/go.mod" "$SRC/kubelet/go.sum" "$SRC/kube-proxy/"
    printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-proxy"\n' > "$SRC/kube-proxy/tools.go"
    (cd "$SRC/kube-proxy" && go mod tidy && go build -trimpath -ldflags="$LDX" -o "$BIN/kube-proxy" k8s.io/kubernetes/cmd/kube-proxy)
  fi
  [ -x "$BIN/crictl" ] || GOBIN=$BIN go install -trimpath -ldflags='-s -w' "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  if [ ! -x "$BIN/pause" ]; then             # the sandbox image's process: static, sleeps, reaps
    rm -rf "$SRC/pause"; mkdir -p "$SRC/pause"; cp "$HERE/pause/main.go" "$SRC/pause/"
    printf 'module pause\n\ngo 1.26\n' > "$SRC/pause/go.mod"
    (cd "$SRC/pause" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$BIN/pause" .)
  fi
  python3 "$HERE/mkimage.py" "$IMG/pause.tar" "$PAUSE_IMAGE" --config '{"Entrypoint":["/pause"],"User":"65535:65535"}' "f:$BIN/pause:/pause:0755" >/dev/null
  [ -f "$IMG/gpuvet.tar" ] || images
}

# gpuvet's image as ko lays it out on distroless/cc-debian12:nonroot: /ko-app/gpuvet, glibc (gpuvet
# needs cgo for NVML's dlopen: CGO_ENABLED=0 does not build), CA bundle, user 65532, /tmp 1777.
images() {
  mkdir -p "$BIN" "$IMG"
  local g=${1:-}
  if [ -z "$g" ]; then
    g=$BIN/gpuvet
    (cd "$GPUVET_SRC" && go build -trimpath -ldflags='-s -w' -o "$g" ./cmd/gpuvet)
  fi
  local libs=() l
  for l in $(ldd "$g" | grep -o '/[^ ]*\.so[^ ]*'); do libs+=("f:$(readlink -f "$l"):$l"); done
  python3 "$HERE/mkimage.py" "$IMG/gpuvet.tar" "$IMAGE" \
    --config '{"Entrypoint":["/ko-app/gpuvet"],"User":"65532","WorkingDir":"/home/nonroot","Env":["PATH=/usr/local/bin:/usr/bin:/bin:/ko-app","SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt","KO_DATA_PATH=/var/run/ko"]}' \
    "f:$g:/ko-app/gpuvet:0755" "${libs[@]}" f:/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644 \
    't:/etc/passwd=root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    't:/etc/group=root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' 't:/etc/nsswitch.conf=passwd: files\ngroup: files\nhosts: files dns\n' \
    d:/tmp:1777 d:/home/nonroot:0700:65532:65532 d:/var/run/ko:0755
  if [ -S "$SOCK" ]; then ctr -a "$SOCK" -n k8s.io images import "$IMG/gpuvet.tar"; fi
}

write_configs() {
  mkdir -p "$ETC/cni" "$RUN" "$VAR"/{containerd,kubelet,pods,opt} "$LOG"
  cat > "$ETC/containerd.toml" <<EOF
version = 2
root = "$VAR/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$VAR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true   # no CAP_SYS_RESOURCE here: runc cannot set pause's -998 ("can't get final child's PID from pipe: EOF")
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/certs.d"   # every registry is 127.0.0.1:1: a pull fails at once, nothing leaves the machine
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC/cni"
EOF
  cat > "$ETC/cni/10-k8s-real.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "k8s-real", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$RUN/cni-ipam"}}]}
EOF
  mkdir -p "$ETC/certs.d/_default"
  printf 'server = "http://127.0.0.1:1"\n[host."http://127.0.0.1:1"]\n  capabilities = ["pull", "resolve"]\n' > "$ETC/certs.d/_default/hosts.toml"
  # Pods resolve nothing: DNS goes to their own loopback and fails at once (no hub, no outside).
  echo 'nameserver 127.0.0.1' > "$ETC/resolv.conf"
  cat > "$ETC/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false            # this machine has cgroup v1 (+ an empty unified); 1.35+ refuse it by default
cgroupDriver: cgroupfs
cgroupRoot: /$CG
containerRuntimeEndpoint: unix://$SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}   # the apiserver calls without a client cert
authorization: {mode: AlwaysAllow}
resolvConf: $ETC/resolv.conf
podLogsDir: $VAR/pods
failSwapOn: false
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
fileCheckFrequency: 20s
EOF
}

start() {
  if alive "$RUN/kubelet.pid" "$BIN/kubelet"; then echo "already running; KUBECONFIG=$KC (clients: $0 exec CMD)"; return 0; fi
  [ -x "$BIN/kubelet" ] && [ -f "$IMG/gpuvet.tar" ] || { echo "run $0 build first"; exit 1; }
  T0=$(date +%s%3N)
  stop >/dev/null 2>&1 || true             # whatever a killed run left
  [ -n "${KEEP_ON_FAIL:-}" ] || trap 'rc=$?; [ $rc -eq 0 ] || { echo "start failed: stopping (KEEP_ON_FAIL=1 keeps it)"; stop >/dev/null 2>&1; }' EXIT
  ls "$PVDIR" 2>/dev/null | sort > "$C/pvdirs.before" || true
  [ -d "$PVDIR" ] || echo new > "$C/pvdir.created"
  local f; : > "$C/created"
  for f in $FIXED; do [ -e "$f" ] || echo "$f" >> "$C/created"; done
  [ -e /run/netns ] || echo new > "$C/netnsdir.created"   # shared with other netns users: only rmdir'd
  ip netns add "$NETNS"
  nsx ip link set lo up
  nsx ip addr add "$NODE_IP/32" dev lo
  nsx env WORK="$CPW" NODES=0 bash "$CP_SCRIPT" start > "$LOG/cp-start.log" 2>&1 || { tail -5 "$LOG/cp-start.log"; exit 1; }
  echo "control plane ready: $(ms) ms"
  write_configs
  nsenter --net=/run/netns/$NETNS containerd --config "$ETC/containerd.toml" > "$LOG/containerd.log" 2>&1 &   # not nsx: $! must be the daemon
  echo $! > "$RUN/containerd.pid"
  for _ in $(seq 1 100); do ctr -a "$SOCK" version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr -a "$SOCK" -n k8s.io images import "$IMG/pause.tar" >/dev/null
  ctr -a "$SOCK" -n k8s.io images import "$IMG/gpuvet.tar" >/dev/null
  echo "containerd ready, images imported: $(ms) ms"
  local h
  for h in /sys/fs/cgroup/*/; do         # the kubelet wants its cgroup root to exist in every hierarchy
    mkdir -p "$h$CG"
    [ -f "$h/cpuset.cpus" ] && { cat "$h/cpuset.cpus" > "$h$CG/cpuset.cpus"; cat "$h/cpuset.mems" > "$h$CG/cpuset.mems"; }
    [ -n "$CPU_SHARES" ] && [ -f "$h$CG/cpu.shares" ] && echo "$CPU_SHARES" > "$h$CG/cpu.shares"
  done
  nsenter --net=/run/netns/$NETNS "$BIN/kubelet" --config="$ETC/kubelet.yaml" --kubeconfig="$KC" --hostname-override="$NODE" --node-ip="$NODE_IP" \
    --node-labels="nvidia.com/gpu.present=true,nvidia.com/gpu.product=$GPU_PRODUCT" \
    --root-dir="$VAR/kubelet" --cert-dir="$VAR/kubelet/pki" -v=2 > "$LOG/kubelet.log" 2>&1 &
  echo $! > "$RUN/kubelet.pid"
  local ok=""
  for _ in $(seq 1 600); do
    alive "$RUN/kubelet.pid" "$BIN/kubelet" || { echo "kubelet died:"; grep -E '^E|rror' "$LOG/kubelet.log" | tail -5; exit 1; }
    api GET "/api/v1/nodes/$NODE" | python3 -c 'import json,sys; n=json.load(sys.stdin); sys.exit(0 if any(c["type"]=="Ready" and c["status"]=="True" for c in n["status"]["conditions"]) else 1)' 2>/dev/null && { ok=1; break; }
    sleep 0.2
  done
  [ -n "$ok" ] || { echo "node $NODE not Ready after 120 s"; grep -E '^E' "$LOG/kubelet.log" | tail -5; exit 1; }
  echo "node $NODE Ready: $(ms) ms"
  # No device plugin: advertise the GPUs as an extended resource (the kubelet copies capacity to allocatable).
  api PATCH "/api/v1/nodes/$NODE/status" application/json-patch+json \
    "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" >/dev/null
  for _ in $(seq 1 300); do
    [ "$(api GET "/api/v1/nodes/$NODE" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["allocatable"].get("nvidia.com/gpu",""))')" = "$GPUS" ] && { ok=2; break; }
    sleep 0.2
  done
  [ "$ok" = 2 ] || { echo "nvidia.com/gpu never became allocatable"; exit 1; }
  if [ -n "${KUBE_PROXY:-}" ]; then           # Services: ClusterIPs DNAT'ed by nftables for the pods (the netns itself has no route to them)
    [ -x "$BIN/kube-proxy" ] || { echo "KUBE_PROXY=1: run KUBE_PROXY=1 $0 build first"; exit 1; }
    nsenter --net=/run/netns/$NETNS "$BIN/kube-proxy" --kubeconfig="$KC" --hostname-override="$NODE" --proxy-mode=nftables \
      --cluster-cidr="$POD_SUBNET" --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
      -v=2 > "$LOG/kube-proxy.log" 2>&1 &
    echo $! > "$RUN/kube-proxy.pid"
    echo "kube-proxy (nftables) started: $(ms) ms"
  fi
  echo "all started: $(ms) ms; node $NODE with $GPUS nvidia.com/gpu; KUBECONFIG=$KC; clients run inside the netns: $0 exec CMD (or nsenter --net=/run/netns/$NETNS CMD)"
}

stop() {
  stop_pid "$RUN/kube-proxy.pid" "$BIN/kube-proxy"
  stop_pid "$RUN/kubelet.pid" "$BIN/kubelet"
  if [ -S "$SOCK" ]; then                 # pods: stop sandboxes through the CRI (CNI DEL, netns, mounts)
    "$BIN/crictl" -r "unix://$SOCK" rmp -fa >/dev/null 2>&1 || true
    ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null | while read -r t; do ctr -a "$SOCK" -n k8s.io tasks kill -s KILL "$t" 2>/dev/null || true; done
  fi
  stop_pid "$RUN/containerd.pid" containerd
  [ -d "$CPW/run" ] && WORK=$CPW bash "$CP_SCRIPT" stop || true
  local m
  for m in $(awk -v a="$RUN" -v b="$VAR" 'index($2,a)==1 || index($2,b)==1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  local h
  for h in /sys/fs/cgroup/*/; do [ -d "$h$CG" ] && find "$h$CG" -depth -type d -exec rmdir {} + 2>/dev/null; done
  ip netns del "$NETNS" 2>/dev/null || true
  if [ -f "$C/netnsdir.created" ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then   # ip netns makes it a mount point
    while grep -q ' /run/netns ' /proc/mounts; do umount /run/netns 2>/dev/null || break; done; rmdir /run/netns 2>/dev/null
  fi; rm -f "$C/netnsdir.created"
  rm -rf "$RUN" "$VAR"
  if [ -f "$C/pvdirs.before" ] && [ -d "$PVDIR" ]; then   # hostPath PV dirs our kubelet created
    comm -13 "$C/pvdirs.before" <(ls "$PVDIR" | sort) | while read -r d; do rm -rf "${PVDIR:?}/$d"; done
    [ -f "$C/pvdir.created" ] && rmdir "$PVDIR" 2>/dev/null || true
  fi
  [ -d /var/log/containers ] && find /var/log/containers -maxdepth 1 -type l -lname "$C/*" -delete
  if [ -f "$C/created" ]; then local f; while read -r f; do [ -n "$f" ] && rm -rf "$f"; done < "$C/created"; fi
  rm -f "$C/pvdirs.before" "$C/pvdir.created" "$C/created"
  # A shim whose containers are gone outlives its containerd (ours: it serves our socket alone).
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io -id .* -address $SOCK" 2>/dev/null && sleep 1
  local left=""
  for h in /sys/fs/cgroup/*/; do [ -d "$h$CG" ] && left+=" cgroup:$h$CG"; done
  pgrep -f "containerd-shim-runc-v2 -namespace k8s.io -id .* -address $SOCK" >/dev/null && left+=" shims"
  [ -z "$left" ] && echo "stopped, nothing left" || echo "stopped; left:$left"
}

status() {
  for p in kube-proxy:$BIN/kube-proxy kubelet:$BIN/kubelet containerd:containerd; do c=${p#*:} p=${p%%:*}; alive "$RUN/$p.pid" "$c" && echo "$p: running (pid $(cat "$RUN/$p.pid"))" || echo "$p: stopped"; done
  [ -e "/run/netns/$NETNS" ] && api GET "/api/v1/nodes/$NODE" | python3 -c 'import json,sys; n=json.load(sys.stdin); print("node", n["metadata"]["name"], [c["type"]+"="+c["status"] for c in n["status"]["conditions"]], "allocatable", n["status"]["allocatable"])' 2>/dev/null || echo "node: none"
}

case "${1:-}" in
  build|start|stop|status) "$1" ;;
  images) shift; images "${1:-}" ;;
  crictl) shift; exec "$BIN/crictl" -r "unix://$SOCK" "$@" ;;
  exec) shift; exec nsenter --net=/run/netns/$NETNS env KUBECONFIG="$KC" "$@" ;;
  *) echo "usage: $0 build|images [GPUVET_BIN]|start|stop|status|exec CMD...|crictl ARGS..." >&2; exit 2 ;;
esac

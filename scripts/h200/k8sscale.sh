#!/bin/bash
# scripts/h200/k8sscale.sh {bundle|stage|run [HARNESS FLAGS...]|collect}
# The Kubernetes scale harness (bench/k8sscale, docs/k8s-scale.md) on the GPU machine's CPUs: the
# same control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and the same
# gpuvet and harness binaries as on the 2-core development machine, on a machine with cores to spare,
# to tell gpuvet's own bounds from the development machine's control plane.
#
# The binaries are a bundle made on the development machine (tar of the control plane's bin folder
# as scripts/k8s-test-env.sh builds it, gpuvet, the harness, stand-ins for curl and openssl where
# the machine lacks them; xz, split in two), since one call carries at most 64 MiB:
#   bundle (here, on the development machine, after `bash scripts/k8s-test-env.sh build`): makes
#          .dev/k8s/part-aa and part-ab (about 6 minutes of xz on 2 cores), and .dev/k8s/new.tar.xz
#          (gpuvet and the harness alone, to carry beside part-ab after a change to gpuvet);
#   stage  (call 1, carrying .dev/k8s/part-aa): puts the first part outside the tree, in $KEEP;
#   run    (call 2, carrying .dev/k8s/part-ab, within the machine's warm window): joins and unpacks
#          the bundle, starts the control plane in a session of its own (so it outlives the call: a
#          later call can run the harness again on the same nodes), and runs the harness with the
#          flags given, in a session of its own too, waiting for it up to $WAIT seconds (540);
#   collect (a later call): waits for the harness again and brings back its log and the N-node
#          run's summary.json and report.html, xz-compressed, in $OUT.
# No GPU is used, and nothing but loopback is a target.
set -uo pipefail
KEEP=${KEEP:-/tmp/k8sscale}
WORK=$KEEP/cp
OUT=${OUT:-/tmp/k8sscale-out}
mkdir -p "$KEEP" "$OUT"

bundle() {
  local d=.dev/k8s cp=${SHARED_CP:-$HOME/.cache/k8s-test/v1.37.2}/bin
  [ -x "$cp/kube-apiserver" ] || { echo "no $cp: run \`bash scripts/k8s-test-env.sh build\` first"; exit 1; }
  rm -rf "$d/stage" && mkdir -p "$d/stage/shim" "$d/new" || exit 1
  go build -trimpath -ldflags='-s -w' -o "$d/new/gpuvet" ./cmd/gpuvet && go build -trimpath -ldflags='-s -w' -o "$d/new/k8sscale" ./bench/k8sscale || exit 1
  cp -a "$cp" "$d/stage/bin" && cp "$d/new/gpuvet" "$d/new/k8sscale" "$d/stage/" && cp scripts/h200/k8sscale-shim/* "$d/stage/shim/"
  openssl genrsa -out "$d/stage/shim/sa.key" 2048 2>/dev/null && openssl rsa -in "$d/stage/shim/sa.key" -pubout -out "$d/stage/shim/sa.pub" 2>/dev/null
  # One LZMA dictionary over all the binaries: the control plane's share most of their code.
  tar cf - -C "$d/stage" bin shim gpuvet k8sscale | xz -T1 --lzma2=preset=9e,dict=1GiB > "$d/bundle.tar.xz" || exit 1
  (cd "$d" && rm -f part-a? && split -n 2 -a 1 bundle.tar.xz part-a && tar cf - -C new gpuvet k8sscale | xz -6 -T2 > new.tar.xz) && ls -la "$d"
}

stage() {
  cp .dev/k8s/part-aa "$KEEP/" && ls -la "$KEEP"
  for t in curl openssl xz nsenter ip; do printf '%s: %s\n' "$t" "$(command -v $t || echo missing)"; done
  nproc; free -g | head -2
}

unpack() {
  [ -x "$KEEP/b/k8sscale" ] && return 0
  [ -f "$KEEP/part-aa" ] || { echo "no $KEEP/part-aa: run stage first (the machine was given back between the calls?)"; exit 1; }
  mkdir -p "$KEEP/b"
  cat "$KEEP/part-aa" .dev/k8s/part-ab | xz -dc | tar -x -C "$KEEP/b" || exit 1
  mkdir -p "$WORK" && ln -sfn "$KEEP/b/bin" "$WORK/bin"
}

# fresh puts a newer gpuvet and harness (.dev/k8s/new.tar.xz, when carried) over the bundle's, so a
# change to gpuvet travels without the control plane again.
fresh() {
  [ -f .dev/k8s/new.tar.xz ] || return 0
  xz -dc .dev/k8s/new.tar.xz | tar -x -C "$KEEP/b" && echo "gpuvet and harness from .dev/k8s/new.tar.xz"
}

# start runs the control plane as the development machine's harness does (bench/k8sscale/cluster.sh:
# no node yet, the controllers' API rate and Job workers raised), in the root network namespace of
# this machine, whose fixed ports no other control plane takes.
start() {
  local shim=$KEEP/shim
  mkdir -p "$shim"
  for t in curl openssl; do
    command -v $t >/dev/null || { ln -sfn "$KEEP/b/shim/$t" "$shim/$t"; echo "$t: stand-in used"; }
  done
  cp "$KEEP/b/shim/sa.key" "$KEEP/b/shim/sa.pub" "$shim/" 2>/dev/null
  setsid env WORK="$WORK" NODES=0 KWOK_PARALLELISM="${KWOK_PARALLELISM:-64}" \
    CM_ARGS="--kube-api-qps=300 --kube-api-burst=600 --concurrent-job-syncs=50 --concurrent-gc-syncs=50" \
    SCHED_ARGS="--kube-api-qps=300 --kube-api-burst=600" bash scripts/k8s-test-env.sh start > "$OUT/start.log" 2>&1 < /dev/null
  local rc=$?
  tail -3 "$OUT/start.log"
  return $rc
}

# run starts the harness in a session of its own (a 1,000-node run may outlast one call's 10
# minutes) and waits for it as collect does.
run() {
  unpack
  fresh
  export PATH=$KEEP/shim:$PATH # the stand-ins start links there, for the tools this machine lacks
  if ! curl -skf -m 5 -H 'Authorization: Bearer testtoken' https://127.0.0.1:6443/readyz >/dev/null 2>&1; then
    start || { tail -30 "$OUT/start.log"; exit 1; }
  fi
  echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); harness flags: $*"
  rm -f "$KEEP/harness.rc" "$KEEP"/heap.prof*
  # gpuvet's heap at its peak and its goroutines every 30 s (cmd/gpuvet/profile.go): what its RSS is
  # made of, and what a run that stalls waits on; collect brings them back.
  export GPUVET_HEAPPROFILE=$KEEP/heap.prof
  setsid bash -c '"$0" -kubeconfig "$1/run/kubeconfig" -gpuvet "$2/b/gpuvet" -keep "$2/keep" "${@:3}" > "$2/harness.log" 2>&1; echo $? > "$2/harness.rc"' \
    "$KEEP/b/k8sscale" "$WORK" "$KEEP" "$@" < /dev/null &
  collect
}

# collect waits (up to $WAIT seconds) for the harness to end, then brings back its log, and the
# N-node run's summary and report (compressed: a file comes back only under 16 MiB).
collect() {
  local t0=$SECONDS
  while [ ! -f "$KEEP/harness.rc" ] && [ $((SECONDS - t0)) -lt "${WAIT:-540}" ]; do sleep 5; done
  cp "$KEEP/harness.log" "$KEEP"/heap.prof* "$OUT/" 2>/dev/null
  if [ ! -f "$KEEP/harness.rc" ]; then
    echo "harness still running after $((SECONDS - t0)) s: collect again"; tail -5 "$OUT/harness.log"; return 3
  fi
  cat "$OUT/harness.log"
  for f in summary.json report.html; do [ -f "$KEEP/keep/all/$f" ] && xz -T0 -c "$KEEP/keep/all/$f" > "$OUT/all-$f.xz"; done
  ls -la "$OUT"
  return "$(cat "$KEEP/harness.rc")"
}

case "${1:-}" in
  bundle) bundle ;;
  stage) stage ;;
  run) shift; run "$@" ;;
  collect) collect ;;
  *) echo "usage: $0 bundle | stage | run [harness flags] | collect" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Issue 26 on one H200, in one call: `gpuvet health` and `gpuvet run --engine transformers` with the
# GPU alone (both end ok), then the same beside a co-tenant (a plain PyTorch BF16 8192³ GEMM loop
# started in the background on the same GPU; both end flag, naming it). Run from the folder holding
# gpuvet, realengine.yaml, make_random_model.py and internal/dataset/words.go (the device tool's
# .dev/busygpu); results go to $OUT. STEPS="health run midload" picks the parts (default: health run);
# ALONE=0 skips the runs with the GPU alone; RUN_TIMEOUT bounds each gpuvet run (seconds, default 330:
# beside the co-tenant the slowed engine's knee search took over 134 s, which a 150 s bound cut).
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
M=/tmp/models/qwen3-0.6b-random
log() { echo "[$(date +%T)] $*"; }
# STEPS: which of health and run to do (both by default).
STEPS=${STEPS:-health run}
has() { [[ " $STEPS " == *" $1 "* ]]; }
exec > >(tee -a "$OUT/busy-${STEPS// /-}.log") 2>&1
# The run's load: the sweep cut short (sync, throughput, one rate, 10 s each); health's inventory and
# busy check on, its benchmarks off (gpuvet health shows them).
RUN=(run -c "$D/realengine.yaml" --engine transformers --model "$M" --gpu-count 1
  --set health.enabled=true --set health.gemm=false --set health.pcie=false --set health.dcgm.enabled=false
  --set load.rates=1 --set load.max_duration=${MAXDUR:-10s})

# cotenant starts the co-tenant in the background: a plain PyTorch BF16 8192^3 GEMM loop on the GPU.
cotenant() {
  python3 -c "
import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
while True:
    c = a @ b
" &
}
# measure NAME WHAT HEALTH_TIMEOUT: gpuvet health and gpuvet run (as STEPS picks), results named NAME.
measure() {
  if has health; then
    log "gpuvet health, $2"
    timeout "$3" "$D/gpuvet" health --out "$OUT/health-$1.json" --dcgm=false
    log "gpuvet health exit $?"
  fi
  if has run; then
    log "gpuvet run, $2"
    timeout "${RUN_TIMEOUT:-330}" "$D/gpuvet" "${RUN[@]}" --out "/tmp/run-$1"
    log "gpuvet run exit $?"
    cp "/tmp/run-$1/summary.json" "$OUT/run-$1.json"
  fi
}

log env
nvidia-smi --query-gpu=index,name,driver_version,power.limit,power.draw,utilization.gpu,memory.used --format=csv
timeout 90 python3 "$D/make_random_model.py" --words "$D/words.go" --size 0.6B --out $M --device cuda >"$OUT/make.log" 2>&1
log "make 0.6B exit $?"

[ "${ALONE:-1}" = 0 ] || measure alone "the GPU alone" 90

log "co-tenant: a PyTorch BF16 8192^3 GEMM loop in the background"
cotenant
CT=$!
sleep 8
nvidia-smi --query-gpu=power.draw,utilization.gpu,memory.used --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
measure cotenant "beside the co-tenant (PID $CT)" 120
kill $CT; wait $CT 2>/dev/null
if has midload; then
  log "gpuvet run, the co-tenant starting 26 s in (during the load)"
  timeout "${RUN_TIMEOUT:-330}" "$D/gpuvet" "${RUN[@]}" --out /tmp/run-midload &
  RP=$!
  sleep 26
  cotenant
  CT=$!
  wait $RP
  log "gpuvet run exit $?"
  kill $CT; wait $CT 2>/dev/null
  cp /tmp/run-midload/summary.json "$OUT/run-midload.json"
fi
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
log done

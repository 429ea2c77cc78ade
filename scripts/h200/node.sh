#!/usr/bin/env bash
# One call on a whole multi-GPU H200 node (the device tool; run from the repo root with gpuvet built
# into .dev/lead): the health phase with the interconnect and a 60 s burn on every GPU at once, then
# gpuvet run with the real transformers engine on every GPU, one at a time and all at once.
# Outputs (8 files) go to $OUT.
set -u
G=${GPUVET:-.dev/lead/gpuvet}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NCCL_NVLS_ENABLE=0
L=$OUT/log.txt
log() { echo "[$(date +%T)] $*" | tee -a "$L"; }
N=$(nvidia-smi -L | wc -l)
M=/tmp/models/qwen3-0.6b-random
log "$N GPUs; making the 0.6B model on the CPU meanwhile"
(timeout 200 python3 scripts/make_random_model.py --size 0.6B --out $M --device cpu >> "$L" 2>&1; echo "make rc=$?" >> "$L") &
{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s; echo "== nvlink -e before"; nvidia-smi nvlink -e; } > "$OUT/smi.txt" 2>&1
timeout 240 "$G" health --parallel --burn 60s --out "$OUT/health.json" > "$OUT/health.txt" 2>&1
log "health rc=$?"
{ echo "== nvlink -e after"; nvidia-smi nvlink -e; } >> "$OUT/smi.txt" 2>&1
wait
for mode in serial parallel; do
  p=1 t=$((100 * N + 40))
  [ $mode = parallel ] && p=$N t=150
  timeout $t "$G" run -c scripts/h200/realengine.yaml --engine transformers --model $M --gpu-count "$N" \
    --parallel-gpus $p --out /tmp/$mode > "$OUT/run-$mode.txt" 2>&1
  log "run $mode (--parallel-gpus $p) rc=$?"
  cp /tmp/$mode/summary.json "$OUT/summary-$mode.json" 2>/dev/null
done
pgrep -fa transformers-front >> "$L" && log "ENGINE LEFT RUNNING" || log "no engine left running"

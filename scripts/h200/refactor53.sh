#!/usr/bin/env bash
# Issue 53's check of the code cut on one real GPU: the same health (NVML inventory, cuBLAS GEMM,
# PCIe, HBM, a short burn) by the binary before the cut and after it, on the same card one after
# the other, then `gpuvet run --engine transformers` by the new binary on a random Qwen3-0.6B (realengine.yaml's
# short sweep, with its health phase on), and the engine-log check of its figures. Run from the repo root with the binaries
# gzipped at .dev/c/gpuvet.gz and .dev/c/gpuvet-old.gz (carried); results in $OUT.
set -u
OUT=${OUT:-/tmp/out}; M=/tmp/models/qwen3-0.6b-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT" /tmp/bin
for b in gpuvet gpuvet-old; do gunzip -c .dev/c/$b.gz > /tmp/bin/$b && chmod +x /tmp/bin/$b; done
log() { echo "[$(date +%T)] $*"; }
exec > >(tee -a "$OUT/run.log") 2>&1
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
log "make the model (first: the health figures are measured on an otherwise idle GPU)"
timeout 150 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 0.6B --out $M --device cuda > /tmp/make.log 2>&1
log "make exit $?"; tail -3 /tmp/make.log
for b in gpuvet-old gpuvet; do
  log "$b health --burn 15s"
  timeout 170 /tmp/bin/$b health --burn 15s --dcgm=false --out "$OUT/health-$b.json" > "$OUT/health-$b.txt" 2>&1
  log "$b health exit $?"; tail -15 "$OUT/health-$b.txt"
done
log "gpuvet run --engine transformers (realengine.yaml's sweep, health on)"
( time timeout 280 /tmp/bin/gpuvet run -c scripts/h200/realengine.yaml --set health.enabled=true --set health.burn=0s \
    --engine transformers --model $M --gpu-count 1 --out /tmp/gv1 ) > "$OUT/gvrun.log" 2>&1
log "run exit $?"; tail -30 "$OUT/gvrun.log"
python3 scripts/check_engine_timing.py /tmp/gv1/summary.json 2>&1 | tee "$OUT/timing.md" | tail -20
cp /tmp/gv1/summary.json "$OUT/summary.json" 2>/dev/null
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
log done

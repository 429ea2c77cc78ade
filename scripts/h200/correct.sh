#!/usr/bin/env bash
# Issue 33 on one H200, in one call (about 4 minutes; at most 6 by the timeouts): `gpuvet health`
# with a 20 s burn (every burn GEMM's answer checked, and one result of each GEMM microbenchmark),
# a random Qwen3-8B made as scripts/h200/device.sh makes it, then a short `gpuvet run --engine
# transformers` (the functional suite's greedy case, the GPU's telemetry under every rung). Run from
# the repo root; GPUVET is the binary (default .dev/gpuvet); everything goes to $OUT: the health
# JSON, the run's summary.json and report.html, and correct.md (scripts/correct_tables.py: the
# burn/GEMM mismatch counts, the greedy case, the rung-by-rung telemetry table).
set -u
GPUVET=${GPUVET:-.dev/gpuvet}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
M=/tmp/models/qwen3-8b-random
log() { echo "[$(date +%T)] $*"; }
exec > >(tee -a "$OUT/correct.log") 2>&1

log env
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm,clocks.max.mem,temperature.gpu --format=csv

# 1. Health: GEMMs and copies, a 20 s burn; DCGM is not installed on this machine.
log "gpuvet health --burn 20s"
timeout 90 "$GPUVET" health --burn 20s --dcgm=false --out "$OUT/health.json"
log "gpuvet health exit $?"

# 2. The random Qwen3-8B (Qwen3-8B's architecture, random weights), on the GPU.
log "make the random Qwen3-8B"
timeout 120 python3 scripts/make_random_model.py --size 8B --out $M --device cuda > "$OUT/make.log" 2>&1
log "make exit $?"; tail -3 "$OUT/make.log"

# 3. A short run: the sweep's synchronous rung (capped at 25 s), its knee search and one rate, 5 s
# each; the functional suite on (its greedy case: 4 prompts × 32 tokens, primed, asked twice).
log "gpuvet run --engine transformers"
rm -rf /tmp/gv-correct
timeout 170 "$GPUVET" run -c scripts/h200/realengine.yaml --engine transformers --model $M --gpu-count 1 \
  --set load.rates=1 --set load.max_duration=5s --set load.max_rung_duration=25s --set load.output_tokens=32 \
  --set functional.enabled=true --out /tmp/gv-correct
log "gpuvet run exit $?"
cp /tmp/gv-correct/summary.json "$OUT/summary.json" 2>/dev/null
cp /tmp/gv-correct/report.html "$OUT/report.html" 2>/dev/null
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"

# 4. The tables: exit 1 when a result mismatched, a greedy repeat differed or outputs differed.
python3 scripts/correct_tables.py --health "$OUT/health.json" --summary "$OUT/summary.json" > "$OUT/correct.md"
log "correct_tables exit $? (0: no mismatch, greedy repeat agrees)"
cat "$OUT/correct.md"
log done

#!/usr/bin/env bash
# Issue 25 on one H200: make the random Qwen3-8B, then in the background (setsid, so that a second
# device call can collect it) the seed's default `gpuvet run --engine transformers` (health on) and
# the realengine.yaml run, each followed by the engine-log check. The first call waits up to WAIT
# seconds; `slowengine.sh collect` waits for the rest. Results: $OUT (one tarball and the logs).
# RUNS="A B" picks the runs (A: the default profile, B: realengine.yaml).
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
W=/tmp/slowengine
M=/tmp/models/qwen3-8b-random
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
log() { echo "[$(date +%T)] $*"; }
collect() {
  for f in runA.log runA-timing.md runB.log runB-timing.md bg.log; do [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"; done
  tar czf "$OUT/runs.tgz" --exclude='*.records.jsonl' -C /tmp $(cd /tmp && ls -d gvA gvB 2>/dev/null) 2>/dev/null
}
wait_bg() { # $1: seconds
  for _ in $(seq 1 "$1"); do [ -f "$W/done" ] && break; sleep 1; done
  collect
}
if [ "${1:-}" = collect ]; then
  wait_bg "${WAIT:-560}"; cat "$W/bg.log"; exit 0
fi
{
  log env; nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  log "make 8B"
  timeout 300 python3 "$D/make_random_model.py" --words "$D/words.go" --size 8B --out $M --device cuda 2>&1 | tail -5
  log "make exit ${PIPESTATUS[0]}"; ls -la $M | head
} 2>&1 | tee "$OUT/make.log"
RUNS=${RUNS:-A B}
cat > "$W/bg.sh" <<BG
set -u
log() { echo "[\$(date +%T)] \$*"; }
if [[ " $RUNS " == *" A "* ]]; then
log "run A: the default profile, health on"
( time "$D/gpuvet" run --engine transformers --model $M --set engine.max_model_len=2048 --set engine.gpu_memory_utilization=0.8 --set engine.ready_timeout=300s --out /tmp/gvA ) > $W/runA.log 2>&1
log "run A exit \$?"
python3 "$D/check_engine_timing.py" /tmp/gvA/summary.json > $W/runA-timing.md 2>&1; log "check A exit \$?"
fi
if [[ " $RUNS " == *" B "* ]]; then
log "run B: realengine.yaml"
( time "$D/gpuvet" run -c "$D/realengine.yaml" --engine transformers --model $M --out /tmp/gvB ) > $W/runB.log 2>&1
log "run B exit \$?"
python3 "$D/check_engine_timing.py" /tmp/gvB/summary.json > $W/runB-timing.md 2>&1; log "check B exit \$?"
fi
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
touch $W/done
BG
setsid bash "$W/bg.sh" > "$W/bg.log" 2>&1 < /dev/null &
wait_bg "${WAIT:-420}"
cat "$W/bg.log"; tail -5 "$W/runA.log" 2>/dev/null

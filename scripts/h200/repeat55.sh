#!/usr/bin/env bash
# Issue 55's check on one H200: two runs, back to back, of the seed's default `gpuvet run --engine
# transformers` (health on) on the random Qwen3-8B, each followed by the engine-log checks (gpuvet ÷
# log per rung, short outputs). The runs go on in the background (setsid) so that `repeat55.sh
# collect` in later calls can fetch them. Run from the repo root, gpuvet at .dev/gpuvet (or gzipped
# at .dev/c/gpuvet.gz); results in $OUT.
set -u
[ -x .dev/gpuvet ] || { mkdir -p .dev && gunzip -c .dev/c/gpuvet.gz > .dev/gpuvet && chmod +x .dev/gpuvet; }
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/repeat55; M=/tmp/models/qwen3-8b-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT" "$W"
collect() {
  cp "$W"/*.log "$W"/*.md "$OUT/" 2>/dev/null
  for n in 1 2; do [ -f "$W/done$n" ] && tar czf "$OUT/gv$n.tgz" --exclude='*.records.jsonl' -C /tmp gv$n; done
}
wait_for() { for _ in $(seq 1 "$2"); do [ -f "$W/$1" ] && break; sleep 1; done; collect; cat "$W/bg.log"; tail -8 "$W"/run*.log 2>/dev/null; }
if [ "${1:-}" = collect ]; then wait_for "${UNTIL:-done2}" "${WAIT:-570}"; exit 0; fi
cat > "$W/bg.sh" <<BG
cd $R
echo "[\$(date +%T)] make model"
[ -f $M/config.json ] || timeout 300 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 8B --out $M --device cuda 2>&1 | tail -1
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
for n in 1 2; do
  echo "[\$(date +%T)] run \$n"
  ( time .dev/gpuvet run --engine transformers --model $M --set engine.max_model_len=2048 --set engine.gpu_memory_utilization=0.8 --set engine.ready_timeout=300s --out /tmp/gv\$n ) > $W/run\$n.log 2>&1
  echo "[\$(date +%T)] run \$n exit \$?"
  python3 scripts/check_engine_timing.py /tmp/gv\$n/summary.json > $W/timing\$n.md 2>&1; echo "timing check exit \$?"
  python3 scripts/check_short_outputs.py /tmp/gv\$n/logs/*/gpu0.log /tmp/gv\$n/raw/*/gpu0.records.jsonl > $W/short\$n.md 2>&1; echo "short check exit \$?"
  touch $W/done\$n
done
BG
setsid bash "$W/bg.sh" > "$W/bg.log" 2>&1 < /dev/null &
wait_for done1 "${WAIT:-570}"

#!/usr/bin/env bash
# Issue 41's check on one H200: the seed's default `gpuvet run --engine transformers` (health on) on
# the random Qwen3-8B, then the engine-log checks (gpuvet ÷ log per rung, short outputs). The run goes
# on in the background (setsid) so that `verify41.sh collect` in a second call can fetch it. Run from
# the repo root, gpuvet at .dev/gpuvet (or gzipped at .dev/c/gpuvet.gz); results in $OUT.
set -u
[ -x .dev/gpuvet ] || { mkdir -p .dev && gunzip -c .dev/c/gpuvet.gz > .dev/gpuvet && chmod +x .dev/gpuvet; }
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/verify41; M=/tmp/models/qwen3-8b-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT" "$W"
collect() {
  for f in run.log timing.md short.md bg.log; do [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"; done
  [ -d /tmp/gv1 ] && tar czf "$OUT/gv1.tgz" --exclude='*.records.jsonl' -C /tmp gv1
  [ -f $W/done ] && ls /tmp/gv1/raw/*/*.records.jsonl >/dev/null 2>&1 && gzip -c /tmp/gv1/raw/*/*records.jsonl > "$OUT/records.jsonl.gz"
}
wait_done() { for _ in $(seq 1 "$1"); do [ -f "$W/done" ] && break; sleep 1; done; collect; cat "$W/bg.log"; tail -25 "$W/run.log" 2>/dev/null; }
if [ "${1:-}" = collect ]; then wait_done "${WAIT:-560}"; exit 0; fi
[ -f $M/config.json ] || timeout 300 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 8B --out $M --device cuda 2>&1 | tail -1
cat > "$W/bg.sh" <<BG
cd $R
echo "[\$(date +%T)] run"
( time .dev/gpuvet run --engine transformers --model $M --set engine.max_model_len=2048 --set engine.gpu_memory_utilization=0.8 --set engine.ready_timeout=300s --out /tmp/gv1 ) > $W/run.log 2>&1
echo "[\$(date +%T)] run exit \$?"
python3 scripts/check_engine_timing.py /tmp/gv1/summary.json > $W/timing.md 2>&1; echo "timing check exit \$?"
python3 scripts/check_short_outputs.py /tmp/gv1/logs/*/gpu0.log /tmp/gv1/raw/*/gpu0.records.jsonl > $W/short.md 2>&1; echo "short check exit \$?"
touch $W/done
BG
setsid bash "$W/bg.sh" > "$W/bg.log" 2>&1 < /dev/null &
wait_done "${WAIT:-520}"

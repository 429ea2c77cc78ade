#!/usr/bin/env bash
# Issue 35 on one H200: a single GPU's run states its detectable slowdown against its own repeat.
# A random Qwen3-0.6B served by the transformers engine is measured twice with the same profile; the
# second run is judged against the first as its baseline (--save-baseline, then --baseline), so the
# overhead table compares one GPU with itself: every row must be ok (an identical GPU never breaches),
# and each row states the smallest overhead it could have shown (rows[].detectable_pct, and the
# terminal's "Detection power" block). Two pairs: the synchronous profile (TTFT, ITL, TPOT p95 and
# median) and a concurrency profile (output tok/s).
#
# Runs from the repo root on the device machine: GPUVET=path/to/gpuvet (default .dev/gpuvet), results
# under $OUT. Budget: about 3 minutes of device time (make 60 s at most, each run 150 s at most, about 60 s each), 6 at
# the very most. ENGINE=sim checks the script's logic anywhere (gpuvet's simulator, no GPU).
set -u
GPUVET=${GPUVET:-.dev/gpuvet}
OUT=${OUT:-/tmp/out}
ENGINE=${ENGINE:-transformers}
M=/tmp/models/qwen3-0.6b-random
W=/tmp/judgepower
mkdir -p "$OUT" "$W"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec > >(tee -a "$OUT/judgepower.log") 2>&1
log() { echo "[$(date +%T)] $*"; }

if [ "$ENGINE" = sim ]; then
  BASE=(run --sim --sim-gpus 1 --set sim.gpu=H200)
else
  BASE=(run -c scripts/h200/realengine.yaml --engine transformers --model "$M" --gpu-count 1 --set health.enabled=false)
  log env
  nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
  timeout 60 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 0.6B --out "$M" --device cuda >"$W/make.log" 2>&1
  log "make 0.6B exit $?"; tail -3 "$W/make.log"
fi
SYNC=(--set load.profile=synchronous --set load.prompt_tokens=128 --set load.output_tokens=16 --set load.max_duration=10s)
CONC=(--set load.profile=concurrency --set load.concurrency=32 --set load.prompt_tokens=128 --set load.output_tokens=64 --set load.max_duration=8s)

# pair NAME PROFILE...: run A saves its summary as a baseline, run B (same GPU, same profile) is
# judged against it; both summaries and the terminal output land in $OUT.
pair() {
  local name=$1; shift
  log "$name A: the first run (--save-baseline)"
  timeout 150 "$GPUVET" "${BASE[@]}" "$@" --save-baseline --force --out "$W/$name-a"
  log "$name A exit $?"
  log "$name B: the repeat, judged against A"
  timeout 150 "$GPUVET" "${BASE[@]}" "$@" --baseline "$W/$name-a/baseline.json" --force --out "$W/$name-b"
  log "$name B exit $?"
  for r in a b; do [ -f "$W/$name-$r/summary.json" ] && cp "$W/$name-$r/summary.json" "$OUT/$name-$r.json"; done
  # The overhead table of B against A: value, overhead with its interval, status, detectable.
  python3 - "$OUT/$name-b.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    print("no summary:", e); sys.exit(0)
b = s.get("baseline") or {}
print("status", s.get("status"), "| baseline note:", b.get("note", "-"))
for r in b.get("rows", []):
    for env in b.get("environments", []):
        ci = (r.get("overhead_ci") or {}).get(env)
        ci = "[%.2f, %.2f]" % (ci["lo"], ci["hi"]) if ci else "-"
        d = (r.get("detectable_pct") or {}).get(env, "-")
        print("%-32s %-26s base %10.3f  repeat %10.3f  overhead %+6.2f %% %-18s %-14s detectable %s %%" % (
            r["subject"], r["metric"], r["baseline"], r["values"].get(env, float("nan")),
            r["overhead_pct"].get(env, 0), ci, r["status"].get(env), d))
PY
}

pair sync "${SYNC[@]}"
pair conc "${CONC[@]}"
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
log done

#!/usr/bin/env bash
# The NVML field decoder's check on one real GPU (issue 53's session of 2026-12-06: unsigned long read
# as 64 bits, link error counters as integers): `gpuvet health` by the binary before the change and
# after it, one after the other on the same card, their inventories compared field by field, with
# nvidia-smi's own NVLink speeds and error counters beside them; then a short `gpuvet run --engine
# transformers` by the new binary on a random Qwen3-0.6B (the synchronous rung, health on) and the
# engine-log check of its figures. Run from the repo root with the binaries gzipped at
# .dev/c/gpuvet.gz and .dev/c/gpuvet-old.gz (carried); results in $OUT.
set -u
OUT=${OUT:-/tmp/out}; M=/tmp/models/qwen3-0.6b-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT" /tmp/bin
for b in gpuvet gpuvet-old; do gunzip -c .dev/c/$b.gz > /tmp/bin/$b && chmod +x /tmp/bin/$b; done
log() { echo "[$(date +%T)] $*"; }
exec > >(tee -a "$OUT/run.log") 2>&1
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm --format=csv
nvidia-smi nvlink -s 2>&1 | head -24 > "$OUT/nvlink.txt"; nvidia-smi nvlink -e 2>&1 | head -40 >> "$OUT/nvlink.txt"
log "nvidia-smi nvlink:"; head -8 "$OUT/nvlink.txt"
for b in gpuvet-old gpuvet; do
  log "$b health --burn 10s"
  timeout 150 /tmp/bin/$b health --burn 10s --dcgm=false --out "$OUT/health-$b.json" > "$OUT/health-$b.txt" 2>&1
  log "$b health exit $?"; tail -8 "$OUT/health-$b.txt"
done
python3 - "$OUT/health-gpuvet-old.json" "$OUT/health-gpuvet.json" <<'PY' | tee "$OUT/inventory-diff.txt"
import json, sys
def leaves(x, p=""):
    if isinstance(x, dict):
        for k, v in x.items(): yield from leaves(v, p + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x): yield from leaves(v, p + "[%d]" % i)
    else: yield p, x
a, b = (dict(leaves(json.load(open(f)).get("gpus") or json.load(open(f)))) for f in sys.argv[1:3])
moving = ("power", "temp", "clock", "util", "memory_used", "energy", "fan", "seconds", "_at", "throughput", "tflops", "gbps", "gb_s")
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and not any(m in k.lower() for m in moving)]
links = [k for k in a if "link" in k.lower()]
print("inventory leaves: %d old, %d new; %d differ outside the moving figures" % (len(a), len(b), len(diff)))
for k in diff[:30]: print("  %s: %r -> %r" % (k, a.get(k), b.get(k)))
print("link leaves (new):", len(links)); [print("  %s = %r" % (k, b.get(k))) for k in links[:12]]
PY
log "make the model"
timeout 150 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 0.6B --out $M --device cuda > /tmp/make.log 2>&1
log "make exit $?"; tail -2 /tmp/make.log
log "gpuvet run --engine transformers (synchronous rung, health on)"
( time timeout 240 /tmp/bin/gpuvet run -c scripts/h200/realengine.yaml --set health.enabled=true --set health.burn=0s \
    --set load.profile=synchronous --engine transformers --model $M --gpu-count 1 --out /tmp/gv1 ) > "$OUT/gvrun.log" 2>&1
log "run exit $?"; tail -25 "$OUT/gvrun.log"
python3 scripts/check_engine_timing.py /tmp/gv1/summary.json 2>&1 | tee "$OUT/timing.md" | tail -12
cp /tmp/gv1/summary.json "$OUT/summary.json" 2>/dev/null
pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
log done

#!/usr/bin/env bash
# An engine that cannot fetch its model from the hub, for real: the transformers engine asked for a
# hub model the machine does not have, on a machine with no network (A: online mode, the hub out of
# reach; B: HF_HUB_OFFLINE=1, no cached copy). model_cache.dir off: with gpuvet's managed cache its
# preflight refuses such a plan before anything starts (exit 2); off, the engine fetches for itself,
# as an engine gpuvet did not provision (a pod, a user's command) does. Each run should end failed on the infrastructure layer
# ("run again"), its GPU inconclusive, with the engine's own words in the finding. Run from the repo
# root with the binary gzipped at .dev/c/gpuvet.gz (carried); results in $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin
gunzip -c .dev/c/gpuvet.gz > /tmp/bin/gpuvet && chmod +x /tmp/bin/gpuvet
exec > >(tee -a "$OUT/hub.log") 2>&1
export PYTHONUNBUFFERED=1 GPUVET_HISTORY_ENABLED=false
for mode in online offline; do
  off=0; [ $mode = offline ] && off=1
  cat > /tmp/hub-$mode.yaml <<YAML
engine:
  kind: transformers
  max_model_len: 2048
  ready_timeout: 240s
  env:
    HF_HUB_OFFLINE: "$off"
    TRANSFORMERS_OFFLINE: "$off"
health:
  enabled: false
model_cache:
  dir: "off"
YAML
  echo "== $mode: HF_HUB_OFFLINE=$off"
  start=$(date +%s)
  timeout 280 /tmp/bin/gpuvet run -c /tmp/hub-$mode.yaml --model Qwen/Qwen3-0.6B --gpu-count 1 --out "$OUT/$mode" > "$OUT/$mode.txt" 2>&1
  echo "exit $? in $(( $(date +%s) - start )) s"
  grep -v '^\[' "$OUT/$mode.txt" | head -20
  python3 - "$OUT/$mode/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("run", s["status"], "layers", s.get("layers"))
for g in s["hosts"][0].get("gpus", []):
    print("gpu", g["index"], g["status"], g.get("action"), (g.get("why") or [""])[0][:300])
for f in s.get("findings", []):
    print("finding", f["layer"], f["status"], f["action"], f["check"], f["reason"][:600])
ep = s["hosts"][0]["models"][0]["endpoints"][0]
print("log tail:", (ep.get("log_tail") or "")[-1200:])
PY
done

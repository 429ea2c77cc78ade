#!/usr/bin/env bash
# Issue 41 on one H200: does the transformers front return short outputs under ignore_eos, and only
# after cut streams? Makes the random Qwen3-8B, serves it with a diagnostic copy of the front
# (shortout_patch.py), runs shortout_client.py, and leaves the logs in $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd); R=$(cd "$D/../.." && pwd)
OUT=${OUT:-/tmp/out}; M=/tmp/models/qwen3-${SIZE:-8B}-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
[ -f $M/config.json ] || timeout 300 python3 "$R/scripts/make_random_model.py" --words "$R/internal/dataset/words.go" --size ${SIZE:-8B} --out $M --device cuda 2>&1 | tail -3
# The patch fits the front of e1c8b72; a later front logs eos_tokens= itself and is served as it is.
cp "$R/internal/engine/front/transformers_front.py" /tmp/front.py && { python3 "$D/shortout_patch.py" /tmp/front.py || { cp "$R/internal/engine/front/transformers_front.py" /tmp/front.py; echo "unpatched front"; }; }
python3 /tmp/front.py --model $M --port 8000 --max-model-len 2048 --gpu-memory-utilization 0.8 > "$OUT/front.log" 2>&1 &
FP=$!
for i in $(seq 1 240); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 1; done
echo "front ready after ${i}s"
timeout ${CLIENT_TIMEOUT:-420} python3 "$D/shortout_client.py" --words "$R/internal/dataset/words.go" --out "$OUT/client.jsonl" ${CLIENT_ARGS:-}
kill $FP; sleep 1
echo "eos seen by the front: $(grep -c 'gpuvet-diag eos' "$OUT/front.log")"
grep 'gpuvet-diag eos' "$OUT/front.log" | head -20
grep -i 'non-existent\|Traceback\|Error' "$OUT/front.log" | sort | uniq -c | sort -rn | head -20
gzip -f "$OUT/front.log"

#!/usr/bin/env bash
# Issue 41 on one H200, second try: gpuvet's own load (`gpuvet bench`, the seed's default sweep, chat
# API) against the diagnostic copy of the transformers front (shortout_patch.py), with request records.
# Run from the repo root with the binary at .dev/gpuvet; results in $OUT.
set -u
[ -x .dev/gpuvet ] || gunzip -c .dev/c/gpuvet.gz > .dev/gpuvet && chmod +x .dev/gpuvet
D=$(cd "$(dirname "$0")" && pwd); R=$(cd "$D/../.." && pwd)
OUT=${OUT:-/tmp/out}; M=/tmp/models/qwen3-8B-random
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
[ -f $M/config.json ] || timeout 300 python3 "$R/scripts/make_random_model.py" --words "$R/internal/dataset/words.go" --size 8B --out $M --device cuda 2>&1 | tail -1
# The patch fits the front of e1c8b72; a later front logs eos_tokens= itself and is served as it is.
cp "$R/internal/engine/front/transformers_front.py" /tmp/front.py && { python3 "$D/shortout_patch.py" /tmp/front.py || { cp "$R/internal/engine/front/transformers_front.py" /tmp/front.py; echo "unpatched front"; }; }
python3 /tmp/front.py --model $M --port 8000 --max-model-len 2048 --gpu-memory-utilization 0.8 > "$OUT/front.log" 2>&1 &
FP=$!
for i in $(seq 1 240); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 1; done
echo "front ready after ${i}s"
timeout ${BENCH_TIMEOUT:-480} "$R/.dev/gpuvet" bench --url http://127.0.0.1:8000 --model $M --profile sweep \
  --out "$OUT/bench.json" --records /tmp/records.jsonl 2>&1 | grep -v '^\s*$' | tail -40
kill $FP; sleep 1
echo "records: $(wc -l < /tmp/records.jsonl); errors by class:"
python3 - <<'PY'
import json, collections
c = collections.Counter(); bad = []
for l in open("/tmp/records.jsonl"):
    r = json.loads(l)
    e = r.get("error") or r.get("Error") or ""
    if e:
        c[e] += 1; bad.append(r)
print(dict(c))
for r in bad[:10]:
    print({k: v for k, v in r.items() if k not in ("marks", "itl")})
PY
echo "eos seen by the front: $(grep -c 'gpuvet-diag eos' "$OUT/front.log")"
grep 'gpuvet-diag eos' "$OUT/front.log" | head
grep -i 'non-existent\|Traceback' "$OUT/front.log" | head
grep -v 'gpuvet-front tokens\|gpuvet-diag submit' "$OUT/front.log" | gzip > "$OUT/front.log.gz"; rm "$OUT/front.log"
gzip -c /tmp/records.jsonl > "$OUT/records.jsonl.gz"

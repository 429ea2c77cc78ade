#!/usr/bin/env bash
# One call on a 2 × H200 machine: make the random Qwen3 models, gpuvet's microbenchmarks beside
# PyTorch's, a smoke test of the transformers front, `gpuvet run --engine transformers` on 1 and on 2
# GPUs, and the engine-log check of gpuvet's figures. Run from the folder holding gpuvet, microbench
# and the repo's scripts (the device tool's .dev/realengine); results go to $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-env models micro smoke run1 run2}
M=/tmp/models
log() { echo "[$(date +%T)] $*"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
exec > >(tee -a "$OUT/run.log") 2>&1

if has env; then
  log env
  nvidia-smi --query-gpu=index,name,driver_version,power.limit,power.draw,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import torch, transformers, tokenizers, aiohttp; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'aiohttp', aiohttp.__version__)"
fi
if has models; then
  log "models: 8B on GPU 1 in the background, 0.6B on GPU 0"
  (CUDA_VISIBLE_DEVICES=1 timeout 300 python3 "$D/make_random_model.py" --words "$D/words.go" --size 8B --out $M/qwen3-8b-random --device cuda > "$OUT/make8b.log" 2>&1; echo "make 8B exit $?" >> "$OUT/make8b.log") &
  MK8=$!
  if [ -z "${SKIP06:-}" ]; then
    CUDA_VISIBLE_DEVICES=0 timeout 120 python3 "$D/make_random_model.py" --words "$D/words.go" --size 0.6B --out $M/qwen3-0.6b-random --device cuda; log "make 0.6B exit $?"
    ls -la $M/qwen3-0.6b-random
  fi
fi
if has micro; then
  log "microbenchmarks side by side (GPU 0)"
  CUDA_VISIBLE_DEVICES=0 timeout 170 python3 "$D/microbench_vs_torch.py" --gpuvet-bench "$D/microbench" --gpu 0 --out "$OUT/microbench.jsonl" > "$OUT/microbench.md"
  log "microbench exit $?"; cat "$OUT/microbench.md"
fi
if has models; then
  wait $MK8; cat "$OUT/make8b.log"; ls -la $M/qwen3-8b-random
fi
if has smoke; then
  log "front smoke test (0.6B, GPU 0)"
  CUDA_VISIBLE_DEVICES=0 timeout 100 python3 "$D/transformers_front.py" --model $M/qwen3-0.6b-random --port 18999 --max-model-len 2048 --gpu-memory-utilization 0.5 > "$OUT/smoke.log" 2>&1 &
  SP=$!
  for i in $(seq 1 90); do curl -sf localhost:18999/health >/dev/null && break; sleep 1; done
  curl -s localhost:18999/v1/chat/completions -H 'Content-Type: application/json' -d "{\"model\":\"$M/qwen3-0.6b-random\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],\"max_tokens\":8,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" | head -c 1500; echo
  kill $SP; wait $SP 2>/dev/null; tail -15 "$OUT/smoke.log"
fi
MODEL=${MODEL:-$M/qwen3-8b-random}
[ -f "$MODEL/config.json" ] || { log "no $MODEL: falling back to the 0.6B"; MODEL=$M/qwen3-0.6b-random; }
for n in 1 2; do
  has run$n || continue
  log "gpuvet run --engine transformers on $n GPU(s): $MODEL"
  rm -rf /tmp/gv$n
  timeout ${RUN_TIMEOUT:-180} "$D/gpuvet" run -c "$D/realengine.yaml" --engine transformers --model "$MODEL" --gpu-count $n --parallel-gpus $n --out /tmp/gv$n
  log "gpuvet run exit $?"
  python3 "$D/check_engine_timing.py" /tmp/gv$n/summary.json | tee -a "$OUT/timing.md"
  tar czf "$OUT/run$n.tgz" --exclude='*.records.jsonl' -C /tmp gv$n
  pgrep -fa transformers-front && echo "ENGINE LEFT RUNNING" || echo "no engine left running"
done
log done

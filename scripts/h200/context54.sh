#!/usr/bin/env bash
# Issue 54 on one H200: the long-context ladder (`load.workload: long-context`, 4 streams) on the
# real transformers engine serving the random Qwen3-8B, twice: A with the GPU to itself, B with
# HALF its HBM held by another process (a PyTorch allocation started first), as memory retired,
# hidden or held would. Each ladder says the engine's KV cache (its cache_config_info), the first
# preempting context, and where the KV arithmetic puts it. The runs go on in the background (setsid)
# so that `context54.sh collect` in a later call fetches them. From the repo root, gpuvet at
# .dev/gpuvet (or gzipped at .dev/c/gpuvet.gz); results in $OUT. P: the engine's memory share.
set -u
[ -x .dev/gpuvet ] || { mkdir -p .dev && gunzip -c .dev/c/gpuvet.gz > .dev/gpuvet && chmod +x .dev/gpuvet; }
R=$(pwd); OUT=${OUT:-/tmp/out}; W=/tmp/ctx54; M=/tmp/models/qwen3-8b-random; P=${P:-0.08}; MAXLEN=${MAXLEN:-16384}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT" "$W"
collect() {
  cp "$W"/*.log "$W"/*.txt "$OUT/" 2>/dev/null
  for n in A B; do [ -f "$W/done$n" ] && tar czf "$OUT/ctx$n.tgz" --exclude='*.records.jsonl' -C /tmp ctx$n; done
}
wait_for() { for _ in $(seq 1 "$2"); do [ -f "$W/$1" ] && break; sleep 1; done; collect; cat "$W/bg.log"; tail -12 "$W"/run*.log 2>/dev/null; }
if [ "${1:-}" = collect ]; then wait_for "${UNTIL:-doneB}" "${WAIT:-570}"; exit 0; fi
cat > "$W/bg.sh" <<BG
cd $R
echo "[\$(date +%T)] make model"
[ -f $M/config.json ] || timeout 300 python3 scripts/make_random_model.py --words internal/dataset/words.go --size 8B --out $M --device cuda 2>&1 | tail -1
python3 - > $W/transformers.txt 2>&1 <<'PY'
import inspect, transformers
print("transformers", transformers.__version__)
from transformers.generation.continuous_batching import requests as r, cache as c
print(inspect.getsource(r.get_device_and_memory_breakdown))
print(inspect.getsource(c.PagedAttentionMemoryHandler.get_available_memory))
import transformers.generation.continuous_batching.offloading_manager as om
print([n for n in dir(om.OffloadingManager) if not n.startswith("__")])
print("upper bound blocks", getattr(c.PagedAttentionMemoryHandler, "_upper_bound_num_blocks", None),
      "batch tokens", getattr(c.PagedAttentionMemoryHandler, "_upper_bound_max_batch_tokens", None))
PY
run() {
  echo "[\$(date +%T)] run \$1"
  ( time .dev/gpuvet run --engine transformers --model $M --set engine.max_model_len=$MAXLEN --set engine.gpu_memory_utilization=$P \
      --set engine.ready_timeout=300s --set health.enabled=false --set load.workload=long-context --set load.profile=concurrency \
      --set load.concurrency=4 --set load.prompt_tokens=512 --set load.output_tokens=32 --set load.max_duration=1s \
      --set compare.min_samples=4 --out /tmp/ctx\$1 ) > $W/run\$1.log 2>&1
  echo "[\$(date +%T)] run \$1 exit \$?"
  grep -h "KV cache\\|cache_config\\|eviction\\|PagedAttentionCache\\|preempt\\|offload" /tmp/ctx\$1/logs/*/gpu0.log | head -20 > $W/engine\$1.txt
  touch $W/done\$1
}
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
run A
python3 -c "import torch,time; free,total=torch.cuda.mem_get_info(); x=torch.empty(total//2, dtype=torch.uint8, device='cuda'); print('holding', total//2>>20, 'MiB of', total>>20, flush=True); open('$W/held','w').write('1'); time.sleep(3600)" > $W/holder.log 2>&1 &
H=\$!
for _ in \$(seq 1 60); do [ -f $W/held ] && break; sleep 1; done
nvidia-smi --query-gpu=memory.total,memory.used --format=csv
run B
kill \$H
BG
setsid bash "$W/bg.sh" > "$W/bg.log" 2>&1 < /dev/null &
wait_for "${UNTIL:-doneB}" "${WAIT:-560}"

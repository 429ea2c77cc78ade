#!/bin/bash
# record.sh GPUVET_BINARY — records the in-pod logs kwokplayer plays back (README.md next to this).
# Each is the whole output of the command line gpuvet's backend gives that Job's pod
# (internal/k8s: runHealth, checkCompletions, runLoad), run here with the real binary against a
# real `gpuvet sim` engine, as the kwok integration tests' stand-in kubelet runs them.
set -euo pipefail
G=$(readlink -f "${1:?usage: record.sh GPUVET_BINARY}")
D=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODEL=Qwen/Qwen3-8B
PORT=${PORT:-18777}
URL=http://127.0.0.1:$PORT
# The harness's load profile (bench/k8sscale: profile), so the plan the load Jobs get says what
# the recording measured.
PROFILE=(--set load.max_duration=3s --set load.rates=2 --set load.max_concurrency=16 --set load.prompt_tokens=64
         --set load.output_tokens=32 --set load.warmup=1)
W=$(mktemp -d)
"$G" sim --gpu H200 --model "$MODEL" --host 127.0.0.1 --port "$PORT" > "$W/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 1 100); do curl -sf "$URL/health" >/dev/null && break; sleep 0.1; done
cd "$W"
"$G" in-pod --emit health.json -- health --out health.json --expect-gpus 8 --sim --sim-count 8 --dcgm=false > "$D/health.log" 2>&1
"$G" in-pod --emit ready.json -- probe --model "$MODEL" --out ready.json --url "$URL" > "$D/ready.log" 2>&1
"$G" in-pod --emit out/summary.json -- run --backend endpoint --url "$URL" --model "$MODEL" --out out \
  --set health.enabled=false "${PROFILE[@]}" > "$D/load.log" 2>&1
ls -l "$D"/*.log

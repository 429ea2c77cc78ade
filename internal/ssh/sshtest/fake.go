package sshtest

// FakeGpuvet is a shell script that plays a remote `gpuvet run` for tests of the transport: it
// prints progress, writes a log and a one-GPU summary (GPU 0 with one endpoint), and obeys FAKE_MODE
// (sleep: wait for SIGTERM, then write a partial summary; fail: exit 2 with no summary, as gpuvet
// does on a host without a driver).
const FakeGpuvet = `#!/bin/sh
echo "run r1: backend local, out $5"
mkdir -p out/logs
echo "engine log" > out/logs/engine-0.log
case "$FAKE_MODE" in
fail) echo "gpuvet: discover: no NVIDIA driver (libnvidia-ml.so.1 not found)" >&2; exit 2 ;;
sleep)
  trap 'echo "{\"schema_version\":\"1.0\",\"complete\":false,\"hosts\":[],\"status\":\"failed\"}" > out/summary.json; exit 1' TERM
  echo started > started
  while :; do sleep 0.1; done ;;
esac
cat > out/summary.json <<'JSON'
{"schema_version":"1.0","complete":true,"backend":"local","hosts":[{"name":"vm","discovery":{"source":"nvml","gpus":[{"index":0,"name":"NVIDIA H200"}]},
 "models":[{"model":"m","status":"ok","endpoints":[{"gpus":[0],"status":"ok"}]}],"status":"ok"}],"status":"ok"}
JSON
echo "done: status ok"
`

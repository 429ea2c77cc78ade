#!/usr/bin/env bash
# The PCIe peak against the link this host offers the card (health.go hostLinkPeak), and the
# clock-event reasons read while each benchmark runs: the host's link as NVML and nvidia-smi report
# it, then `gpuvet health` (NVML inventory, cuBLAS GEMM, the PCIe copies, HBM; no burn) and each
# GPU's figures, peaks, ratios, clock reasons and notes from its JSON.
# Run from the repo root with the binary gzipped at .dev/c/gpuvet.gz (carried); results in $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin
gunzip -c .dev/c/gpuvet.gz > /tmp/bin/gpuvet && chmod +x /tmp/bin/gpuvet
exec > >(tee -a "$OUT/run.log") 2>&1
nvidia-smi --query-gpu=index,name,pcie.link.gen.max,pcie.link.gen.current,pcie.link.gen.gpumax,pcie.link.gen.hostmax,pcie.link.width.max,pcie.link.width.current --format=csv
nvidia-smi -q | sed -n "/PCI/,/Tx Throughput/p" | head -40
timeout 200 /tmp/bin/gpuvet health --burn 0s --dcgm=false --out "$OUT/health.json" > "$OUT/health.txt" 2>&1
echo "health exit $?"; tail -25 "$OUT/health.txt"
python3 - "$OUT/health.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
for g in h.get("gpus", []):
    gi = g["gpu"]
    print(gi.get("index"), gi.get("name"), "pcie", gi.get("pcie"))
    for b in g.get("bench", []):
        print("  ", b["name"], round(b["value"], 1), b.get("unit"), "peak", b.get("peak"), "ratio", round(b.get("ratio") or 0, 3), "floor", b.get("floor"), b["status"], "clock reasons", b.get("clock_reasons"))
    for n in g.get("notes", []):
        print("   note:", n)
    for f in g.get("flags", []):
        print("   flag:", f["check"], f["reason"][:160])
PY

#!/usr/bin/env python3
"""gpuvet's microbenchmarks side by side with PyTorch on the same GPU, in one run, at the same sizes.

  python3 bench/microbench_vs_torch.py --gpuvet-bench ./microbench --gpu 0 --out results.jsonl > table.md

gpuvet's figures come from bench/microbench (internal/cuda: the code `gpuvet health` runs); PyTorch's
from torch.mm / Tensor.copy_ timed with CUDA events on random operands. Each size is measured in
passes alternating the two tools (gpuvet, torch, torch, gpuvet) so clocks and temperature drift hit
both. The table holds gpuvet's figure at the size `gpuvet health` uses (median of its passes) against
PyTorch's best over every size and pass, as a ratio: the goal is ≥ 0.97.
"""

import argparse
import json
import statistics
import subprocess
import sys

import torch

MiB, GiB = 1 << 20, 1 << 30
SWEEP = {
    "sgemm_fp32": [8192, 12288, 16384],
    "gemm_tf32": [8192, 12288, 16384],
    "gemm_bf16": [4096, 8192, 12288, 16384],
    "pcie_h2d": [64 * MiB, 256 * MiB, 1 * GiB],
    "pcie_d2h": [64 * MiB, 256 * MiB, 1 * GiB],
    "hbm_d2d": [512 * MiB, 2 * GiB, 4 * GiB],
}
UNIT = {"sgemm_fp32": "TFLOP/s", "gemm_tf32": "TFLOP/s", "gemm_bf16": "TFLOP/s",
        "pcie_h2d": "GB/s", "pcie_d2h": "GB/s", "hbm_d2d": "GB/s"}


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0


def torch_gemm(name, n):
    dtype = torch.bfloat16 if name == "gemm_bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = name == "gemm_tf32"
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    a = torch.empty(n, n, device="cuda", dtype=dtype).uniform_(-1, 1)
    b = torch.empty(n, n, device="cuda", dtype=dtype).uniform_(-1, 1)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    flops = 2.0 * n ** 3
    iters = max(5, min(200, int(2e14 / flops)))  # about a second or more of work per figure
    secs = timed(lambda: torch.mm(a, b, out=c), 2, iters)
    del a, b, c
    return flops * iters / secs / 1e12


def torch_copy(name, size):
    if name == "hbm_d2d":
        src = torch.empty(size, dtype=torch.uint8, device="cuda").random_()
        dst = torch.empty_like(src)
        secs = timed(lambda: dst.copy_(src), 1, 20)
        return 2.0 * size * 20 / secs / 1e9
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(7)  # DMA does not care what it moves
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    if name == "pcie_h2d":
        secs = timed(lambda: dev.copy_(host, non_blocking=True), 1, 20)
    else:
        secs = timed(lambda: host.copy_(dev, non_blocking=True), 1, 20)
    return 1.0 * size * 20 / secs / 1e9


def torch_pass(names):
    out = []
    for name in names:
        for size in SWEEP[name]:
            fn = torch_copy if name.startswith(("pcie", "hbm")) else torch_gemm
            out.append({"tool": "torch", "name": name, "size": size, "value": fn(name, size), "unit": UNIT[name]})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    torch.cuda.empty_cache()
    return out


def gpuvet_pass(binary, gpu, names):
    args = [f"{n}:0" for n in names] + [f"{n}:{s}" for n in names for s in SWEEP[n]]
    p = subprocess.run([binary, "-gpu", str(gpu)] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{binary}: exit {p.returncode}: {p.stderr}")
    out = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    for f in out:
        print(json.dumps(f), file=sys.stderr, flush=True)
        if f.get("error"):
            sys.exit(f"gpuvet {f['name']}: {f['error']}")
    return out


def fmt_size(name, size):
    if name.startswith(("pcie", "hbm")):
        return f"{size // GiB} GiB" if size >= GiB else f"{size // MiB} MiB"
    return f"n={size}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuvet-bench", required=True, help="the bench/microbench binary")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--names", default=",".join(SWEEP))
    ap.add_argument("--out", help="write every figure as JSON lines here")
    a = ap.parse_args()
    names = a.names.split(",")
    torch.cuda.set_device(a.gpu)
    figs = gpuvet_pass(a.gpuvet_bench, a.gpu, names)
    figs += torch_pass(names) + torch_pass(names)
    figs += gpuvet_pass(a.gpuvet_bench, a.gpu, names)
    if a.out:
        with open(a.out, "w") as f:
            for x in figs:
                f.write(json.dumps(x) + "\n")
    print(f"GPU {a.gpu}: {torch.cuda.get_device_name(a.gpu)}; torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuBLAS via torch; two passes of each tool, alternated\n")
    print("| benchmark | unit | gpuvet health (default size, median of 2) | gpuvet's best size | PyTorch at gpuvet's default size | PyTorch best (size) | gpuvet ÷ PyTorch best |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        gd = [f for f in figs if f["tool"] == "gpuvet" and f["name"] == name and f["size"] == 0]
        detail = gd[0].get("detail", "")
        default = statistics.median(f["value"] for f in gd)
        gs = [f for f in figs if f["tool"] == "gpuvet" and f["name"] == name and f["size"] > 0]
        gbest = max(gs, key=lambda f: f["value"])
        ts = [f for f in figs if f["tool"] == "torch" and f["name"] == name]
        tbest = max(ts, key=lambda f: f["value"])
        # The size gpuvet health uses, read from its description, for PyTorch at the same size.
        same = [f["value"] for f in ts if fmt_size(name, f["size"]) in detail or f"n={f['size']}" in detail]
        same_s = f"{max(same):.1f}" if same else "—"
        print(f"| {name} | {UNIT[name]} | {default:.1f} ({detail}) | {gbest['value']:.1f} ({fmt_size(name, gbest['size'])}) | "
              f"{same_s} | {tbest['value']:.1f} ({fmt_size(name, tbest['size'])}) | {default / tbest['value']:.3f} |")


if __name__ == "__main__":
    main()

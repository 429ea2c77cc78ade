package sim

import (
	"fmt"
	"math"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// archFigures are the two figures per GPU architecture that the physics does not give: how close
// a large BF16 GEMM gets to the datasheet tensor peak (clocks under the power limit, instruction
// issue), and how close a streaming read gets to the datasheet memory bandwidth (refresh, page
// turns). Everything else in a step's cost (small-shape losses, kernel boundaries, all-reduces)
// is derived from the shape of the step and the link.
type archFigures struct {
	gemm, mem float64
	// basis says where the figures come from, on which GPU (shown by `gpuvet sim --help` and
	// docs/sim-validation.md); the architecture's other GPUs are extrapolated from that one.
	basis, on string
}

var archFig = map[string]archFigures{
	// Measured on an H200 SXM (cuBLAS BF16 GEMM n=16384: 0.79 of 989 TFLOP/s; device-to-device copy:
	// 0.86 of 4.8 TB/s), the same figures the simulated health microbenchmarks use.
	"Hopper": {gemm: 0.79, mem: 0.86, on: "H200", basis: "measured: cuBLAS BF16 GEMM 0.79 of peak, HBM copy 0.86"},
	// A100: fitted to the A100 rows marked fitted in docs/sim-validation.md (Llama-3.1-8B TPOT at
	// 4 req/s and the offline throughput of 5000 ShareGPT prompts).
	"Ampere": {gemm: 0.60, mem: 0.75, on: "A100", basis: "fitted to the A100 fit rows of the validation table (Llama-3.1-8B TPOT, offline throughput)"},
	// L40S: its 362 TFLOP/s BF16 datasheet figure is far from reached under its 350 W limit; set by
	// the L40S calibration case (Qwen2.5-3B: sync TTFT of a 512-token prompt, one compute-bound
	// prefill step, and the sustained rate at 128 streams).
	"Ada Lovelace": {gemm: 0.33, mem: 0.86, on: "L40S", basis: "fitted to the L40S calibration case (512-token prefill TTFT, 128-stream rate)"},
	// Blackwell: set by the GB200 calibration case (Qwen3-8B, 256 streams, 128/128); B200 and the
	// RTX PRO 6000 (GDDR7, PCIe) have no published BF16 vLLM figure here, so theirs are GB200's.
	"Blackwell": {gemm: 0.45, mem: 0.75, on: "GB200", basis: "fitted to the GB200 calibration case (Qwen3-8B, 256 streams)"},
}

// ArchBasis describes where the simulator's efficiency figures for each catalog GPU come from,
// for help text and docs: one line per GPU.
func ArchBasis() []string {
	var out []string
	for _, g := range catalog.GPUs {
		f, ok := archFig[g.Architecture]
		switch {
		case g.MFU > 0 && g.MBU > 0:
			out = append(out, fmt.Sprintf("%s: mfu/mbu from the catalog entry", g.Key))
		case !ok:
			out = append(out, fmt.Sprintf("%s: no figures for architecture %q (set mfu and mbu in a catalog file)", g.Key, g.Architecture))
		case g.Key != f.on:
			out = append(out, fmt.Sprintf("%s (%s): extrapolated from %s, same architecture; there: %s", g.Key, g.Architecture, f.on, f.basis))
		default:
			out = append(out, fmt.Sprintf("%s (%s): %s", g.Key, g.Architecture, f.basis))
		}
	}
	return out
}

// Constants of the step cost that no datasheet gives, each with the measurement that sets it.
const (
	// gemmTile is the output tile (rows and columns) of the BF16 tensor-core GEMM kernels cuBLAS
	// and CUTLASS pick for these shapes on Ampere and later: a GEMM runs in waves of one tile per
	// SM, so a step with few tokens, or a narrow per-GPU slice under TP, leaves SMs idle.
	gemmTile = 128
	// kernelsPerLayer is the kernels one transformer layer launches per step in vLLM with CUDA
	// graphs (norm, QKV, rotary, attention, O, norm, gate-up, activation, down, plus one
	// all-reduce after attention and one after the MLP under TP).
	kernelsPerLayer = 9
	// kernelGapUs is the idle time at each kernel boundary (drain of the last wave, launch of the
	// next from the graph). Set by the vLLM nightly latency tests on H200 (batch 8, 32 in / 128
	// out: Llama-3.1-8B 833 ms and Llama-3-70B TP4 2078 ms, i.e. 6.5 and 16.2 ms a step against 3.6
	// and 8.4 ms of weight reads at the achieved bandwidth).
	kernelGapUs = 6.0
	// ridgeSharpness is the exponent of the smooth maximum of compute and memory time: a kernel
	// near the ridge point overlaps them imperfectly. Set by the same fit.
	ridgeSharpness = 3.0
	// allReduceEff is the fraction of the link's bandwidth a decode-sized all-reduce achieves:
	// vLLM's custom all-reduce on H100 TP4 moves 1 MiB in 40 µs and 32 KiB in 9 µs
	// (sgl-project/sglang#2904), i.e. ~9 µs of latency and ~50 GB/s of 450.
	allReduceEff = 0.12
	// stepCPUms and seqCPUus are the engine's CPU time per step (schedule, prepare inputs, launch
	// the graph, sample) and per sequence in it. vLLM V1's own figure: GPU time of a Llama-8B H100
	// step "as low as ~5 ms" with CPU work overlapped except ~1 ms; the per-sequence cost is set by
	// the H100 Qwen3-8B 256-stream calibration case.
	stepCPUms = 1.0
	seqCPUus  = 8.0
	// tpStepUs is the extra CPU cost of a TP step: the scheduler output is broadcast to every worker
	// through a shared-memory queue and each rank launches its own graph. vLLM's V1 post gives no
	// figure; a few hundred µs, checked by the same TP4 latency test.
	tpStepUs = 300.0
)

// waveFill is the fraction of SMs a step's GEMMs keep busy: tiles of gemmTile×gemmTile over
// (tokens × the mean per-GPU output width of the layer's GEMMs), scheduled in waves of one tile per SM.
func waveFill(g catalog.GPU, m catalog.Model, tokens, tp int) float64 {
	if g.SMs <= 0 || tokens <= 0 {
		return 1
	}
	// Mean output width of a layer's four GEMMs (QKV, O, gate-up, down) on one GPU.
	width := roofline.MatmulParams(m) / float64(m.Layers*m.Hidden) / 4 / float64(tp)
	tiles := math.Ceil(float64(tokens)/gemmTile) * math.Ceil(width/gemmTile)
	waves := math.Ceil(tiles / float64(g.SMs))
	return tiles / (waves * float64(g.SMs))
}

// smoothMax is max(a, b) rounded at the ridge: (a^k + b^k)^(1/k).
func smoothMax(a, b float64) float64 {
	if a == 0 || b == 0 {
		return a + b
	}
	k := ridgeSharpness
	return math.Pow(math.Pow(a, k)+math.Pow(b, k), 1/k)
}

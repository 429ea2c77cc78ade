// Package roofline is the speed of light of LLM inference: what one engine step (or one decode
// token) cannot beat on a GPU, from the datasheet peaks alone. It has no efficiency factors and no
// overheads: the simulator adds those on top (internal/sim), and a real benchmark states its measured
// figure as a fraction of these bounds. It reads only catalog figures and plain values.
package roofline

import (
	"math"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// Step is the work of one engine step (all sequences in the batch together).
type Step struct {
	Tokens int // tokens computed: one per decoding sequence plus every prefill chunk token
	// AttnCtx is Σ over computed tokens of the context each token attends to (itself included):
	// a decode at context C adds C, a prefill chunk of n tokens after c cached adds n·(c + n/2).
	AttnCtx float64
	// KVRead is Σ over the step's sequences of the context whose K and V are read (each sequence's KV
	// is read once per step, whatever its number of new tokens).
	KVRead float64
}

// DecodeStep is the step of B sequences decoding one token each at context C.
func DecodeStep(batch int, ctx float64) Step {
	b := float64(batch)
	return Step{Tokens: batch, AttnCtx: b * ctx, KVRead: b * ctx}
}

// PrefillStep is the step that computes a whole prompt of n tokens (nothing cached).
func PrefillStep(n int) Step {
	f := float64(n)
	return Step{Tokens: n, AttnCtx: f * f / 2, KVRead: f}
}

// MatmulParams is the number of weights that take part in a token's matrix multiplies: all of them
// but the input embedding table, whose "multiply" is a row lookup. A model with tied embeddings
// multiplies by that table again in the LM head, so it counts there.
func MatmulParams(m catalog.Model) float64 {
	if m.TiedEmbeddings {
		return m.Params
	}
	return math.Max(m.Params-float64(m.Vocab*m.Hidden), 0)
}

// FLOPs is the arithmetic of a step on the whole model: 2 FLOPs per weight per token for the
// multiplies, and for attention 2 FLOPs per query-key dot product element and 2 per value-weighted
// sum element, per layer, per query head: 4 · layers · heads · head_dim per (token, context position).
func FLOPs(m catalog.Model, s Step) float64 {
	return 2*MatmulParams(m)*float64(s.Tokens) + 4*float64(m.Layers*m.Heads*m.HeadDim)*s.AttnCtx
}

// Bytes is the HBM traffic a step cannot avoid on the whole model: every multiplied weight once,
// and the K and V of every context position of every sequence once.
func Bytes(m catalog.Model, s Step) float64 {
	return MatmulParams(m)*float64(m.DTypeBytes) + s.KVRead*m.KVBytesPerToken()
}

// ComputeSeconds is the compute bound of a step split over tp GPUs: FLOPs at the dense BF16 tensor
// peak of each.
func ComputeSeconds(g catalog.GPU, m catalog.Model, s Step, tp int) float64 {
	return FLOPs(m, s) / float64(max(tp, 1)) / (g.BF16TFLOPS * 1e12)
}

// MemorySeconds is the memory bound of a step split over tp GPUs: bytes at each GPU's HBM peak.
func MemorySeconds(g catalog.GPU, m catalog.Model, s Step, tp int) float64 {
	return Bytes(m, s) / float64(max(tp, 1)) / (g.HBMGBps * 1e9)
}

// StepSeconds is the speed-of-light time of a step: the larger of its compute and memory bounds.
// Communication is not in it (see AllReduceSeconds).
func StepSeconds(g catalog.GPU, m catalog.Model, s Step, tp int) float64 {
	return math.Max(ComputeSeconds(g, m, s, tp), MemorySeconds(g, m, s, tp))
}

// ComputeBound reports whether the step is limited by FLOPs rather than bytes.
func ComputeBound(g catalog.GPU, m catalog.Model, s Step, tp int) bool {
	return ComputeSeconds(g, m, s, tp) >= MemorySeconds(g, m, s, tp)
}

// DecodeTokS is the speed-of-light output rate, tokens per second for the whole TP group, of batch
// sequences decoding together at context ctx (prompt plus tokens generated so far).
func DecodeTokS(g catalog.GPU, m catalog.Model, batch int, ctx float64, tp int) float64 {
	if batch <= 0 {
		return 0
	}
	return float64(batch) / StepSeconds(g, m, DecodeStep(batch, ctx), tp)
}

// PrefillSeconds is the speed-of-light time to compute a prompt of n tokens alone.
func PrefillSeconds(g catalog.GPU, m catalog.Model, n, tp int) float64 {
	return StepSeconds(g, m, PrefillStep(n), tp)
}

// ServeTokS is the speed-of-light output rate of an engine that keeps batch sequences in flight,
// each a prompt of prompt tokens then output tokens decoded: over the life of a batch the GPU
// decodes output steps of the whole batch (at the mean context, prompt plus half the output) and
// computes each sequence's prompt once, so batch × output tokens take
// output × t_decode + batch × t_prefill. Unlike DecodeTokS it counts the prefill a serving engine
// cannot skip, so the share of it a healthy engine reaches changes little with the prompt/output mix.
func ServeTokS(g catalog.GPU, m catalog.Model, batch, prompt, output, tp int) float64 {
	if batch <= 0 || output <= 0 {
		return 0
	}
	ctx := float64(prompt) + float64(output)/2
	t := float64(output)*StepSeconds(g, m, DecodeStep(batch, ctx), tp) + float64(batch)*PrefillSeconds(g, m, max(prompt, 1), tp)
	return float64(batch*output) / t
}

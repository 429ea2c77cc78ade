// Package roofline is the one formula for what a GPU can do for a model: the time of one engine step
// at the datasheet's FLOP/s and HBM bandwidth. The simulator scales it by its efficiency factors to
// predict; the run phase uses it as is for speed-of-light (a measured figure as % of the bound).
package roofline

import (
	"math"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// Step is what one engine step computes.
type Step struct {
	Tokens  float64 // tokens computed: decode tokens plus prefill tokens
	AttnCtx float64 // Σ over computed tokens of the context each attends to
	KVRead  float64 // Σ over sequences of their context length (the KV cache is read once per sequence)
}

// Cost is the time of one step at 100 % of the datasheet, per GPU of a tensor-parallel group.
type Cost struct {
	ComputeSeconds float64 // FLOPs ÷ BF16 tensor FLOP/s
	MemorySeconds  float64 // bytes read (weights once, plus the KV cache) ÷ HBM bandwidth
}

// StepCost is the roofline of one step of model m on tp GPUs like gpu: FLOPs are 2 per parameter per
// token plus attention (4·layers·hidden per token per context token); bytes are the weights once
// plus the KV cache of every sequence; both split evenly over the tp GPUs.
func StepCost(gpu catalog.GPU, m catalog.Model, tp int, s Step) Cost {
	t := float64(max(1, tp))
	flops := 2*m.Params*s.Tokens + 4*float64(m.Layers*m.Hidden)*s.AttnCtx
	bytes := m.WeightBytes() + s.KVRead*m.KVBytesPerToken()
	return Cost{
		ComputeSeconds: flops / t / (gpu.BF16TFLOPS * 1e12),
		MemorySeconds:  bytes / t / (gpu.HBMGBps * 1e9),
	}
}

// Seconds is the bound: the larger of the two.
func (c Cost) Seconds() float64 { return math.Max(c.ComputeSeconds, c.MemorySeconds) }

// Limit names the side that bounds the step: "memory" or "compute".
func (c Cost) Limit() string {
	if c.ComputeSeconds > c.MemorySeconds {
		return "compute"
	}
	return "memory"
}

// Serving is a steady state of an engine: Batch sequences in the batch, requests of PromptTokens in
// and OutputTokens out on average.
type Serving struct {
	Batch        float64
	PromptTokens float64
	OutputTokens float64
}

// OutputTokPerSecBound is the speed of light of output tokens per second at that steady state. Each
// step yields Batch output tokens; for each of them the engine must also prefill PromptTokens ÷
// OutputTokens prompt tokens (each attending to half its prompt on average), and it reads the weights
// once and the KV cache of every sequence, whose mean context is the prompt plus half the output.
func OutputTokPerSecBound(gpu catalog.GPU, m catalog.Model, tp int, s Serving) (float64, Cost) {
	if s.Batch <= 0 || s.OutputTokens <= 0 || gpu.BF16TFLOPS <= 0 || gpu.HBMGBps <= 0 {
		return 0, Cost{}
	}
	ctx := s.PromptTokens + s.OutputTokens/2
	prefill := s.Batch * s.PromptTokens / s.OutputTokens
	c := StepCost(gpu, m, tp, Step{
		Tokens:  s.Batch + prefill,
		AttnCtx: s.Batch*ctx + prefill*s.PromptTokens/2,
		KVRead:  s.Batch * ctx,
	})
	return s.Batch / c.Seconds(), c
}

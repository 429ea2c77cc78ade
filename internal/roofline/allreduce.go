package roofline

import "github.com/gpuvet/gpuvet/internal/catalog"

// AllReduceBytes is the message of one tensor-parallel all-reduce in a step: the hidden states of
// every token computed (tokens × hidden × bytes per element).
func AllReduceBytes(m catalog.Model, tokens int) float64 {
	return float64(tokens) * float64(m.Hidden) * float64(m.DTypeBytes)
}

// AllReduceSeconds is the time of one all-reduce of msg bytes over tp GPUs joined by link: the
// link's small-message latency plus the bandwidth term of a ring (or reduce-scatter + all-gather),
// in which each GPU sends 2·(tp−1)/tp of the message at the link's one-direction bandwidth.
func AllReduceSeconds(link catalog.GPULink, msg float64, tp int) float64 {
	if tp <= 1 || link.GBps <= 0 {
		return 0
	}
	n := float64(tp)
	return 2*(n-1)/n*msg/(link.GBps*1e9) + link.LatencyUs/1e6
}

// TPStepCommSeconds is the communication bound of one step under tensor parallelism: two
// all-reduces per layer (after attention and after the MLP, Megatron-style), each of the step's
// hidden states.
func TPStepCommSeconds(link catalog.GPULink, m catalog.Model, tokens, tp int) float64 {
	return float64(2*m.Layers) * AllReduceSeconds(link, AllReduceBytes(m, tokens), tp)
}

package fleet

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// An inconclusive host with no flag and no error still says why: what left each GPU undecided,
// GPUs with the same reason named together (a pending node's annotation and "needs a person" read it).
func TestHostReasonOfAnUndecidedHost(t *testing.T) {
	h := results.Host{Status: results.StatusInconclusive, GPUs: []results.GPUVerdict{
		{Index: 0, Status: results.StatusInconclusive, Why: []string{"client-limited"}},
		{Index: 1, Status: results.StatusInconclusive, Why: []string{"client-limited", "too few samples"}},
		{Index: 2, Status: results.StatusOK},
	}}
	want := "undecided on gpu 0,1: client-limited; undecided on gpu 1: too few samples"
	if got := HostReason(h); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Six comparisons undecided for one cause are one line naming the six (a node annotation cut the
// six lines after two).
func TestHostReasonGroupsOneCause(t *testing.T) {
	cause := "both figures are client-limited (the load generator, not the servers, set them): rerun with --parallel-gpus 1"
	var why []string
	for _, m := range []string{"sustained_req_s", "output_tok_s_peak", "ttft_p95_ms"} {
		why = append(why, "Qwen/Qwen3-8B GPU-to-GPU "+m+": "+cause)
	}
	h := results.Host{Status: results.StatusInconclusive, GPUs: []results.GPUVerdict{
		{Index: 0, Status: results.StatusInconclusive, Why: why},
		{Index: 1, Status: results.StatusInconclusive, Why: append(why[:2:2], "Qwen/Qwen3-8B GPU-to-GPU itl_p95_ms: the interval reaches past the margin")},
	}}
	want := "undecided on gpu 0,1: Qwen/Qwen3-8B GPU-to-GPU sustained_req_s, output_tok_s_peak, ttft_p95_ms: " + cause +
		"; undecided on gpu 1: Qwen/Qwen3-8B GPU-to-GPU itl_p95_ms: the interval reaches past the margin"
	if got := HostReason(h); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

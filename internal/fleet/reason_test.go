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

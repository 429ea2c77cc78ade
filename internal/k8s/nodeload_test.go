package k8s

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 52: a node's load ignored the profile it was asked for (the Job runs the plan serve wrote).
// It now holds it to that plan's profile: another is an error before any Job is made, never a load
// other than the one asked.
func TestNodeLoadHoldsItsProfile(t *testing.T) {
	planned := results.LoadConfig{Profile: "sweep", Rates: 5, PromptTokens: 1000, OutputTokens: 1000}
	np := &nodePipeline{h: &nodeHost{r: &Run{}, node: Node{Name: "gpu-node-1"}}, jobs: map[string]*nodeServed{}}
	np.remember("http://e", &nodeServed{job: "gpuvet-load-0", what: "engine pod e", profile: planned})
	other := planned
	other.Profile, other.Concurrency = "concurrency", 32
	_, err := np.load(context.Background(), "http://e", "m", "", other, "")
	if err == nil || !strings.Contains(err.Error(), "runs its plan's load profile (sweep), not the one asked (concurrency)") {
		t.Fatalf("another profile: %v", err)
	}
}

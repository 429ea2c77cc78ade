package pipeline

import (
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// The peak run's in-flight requests (req/s × mean E2E) are the batch; the bound is the shared
// roofline's at that batch, and the percentage is the peak over it.
func TestSpeedOfLightAtThePeak(t *testing.T) {
	ld := &results.Load{Runs: []results.Run{
		{Kind: "synchronous", OutputTokS: 90, ReqS: 0.7, E2E: results.Dist{Count: 10, Mean: 1400}, MeanPromptTokens: 256, MeanOutputTokens: 128},
		{Kind: "throughput", Concurrency: 64, OutputTokS: 4000, ReqS: 31.25, E2E: results.Dist{Count: 500, Mean: 2000}, MeanPromptTokens: 256, MeanOutputTokens: 128},
	}}
	s, note := speedOfLight("NVIDIA H200", "Qwen/Qwen3-8B", 1, ld)
	if s == nil {
		t.Fatal(note)
	}
	g, _ := catalog.LookupGPU("H200")
	m, _ := catalog.LookupModel("Qwen/Qwen3-8B")
	want := roofline.DecodeTokS(g, m, 63, 256+64, 1) // 62.5 in flight, rounded; context prompt + half the output
	if s.Batch != 62.5 || math.Abs(s.BoundOutputTokS-want) > 1e-9 || math.Abs(s.Percent-100*4000/want) > 1e-9 || s.Limit != "memory" {
		t.Errorf("got %+v, want bound %v", s, want)
	}
	if !strings.Contains(s.BatchSource, "throughput c=64") || s.GPU != "H200" || s.Model != "catalog" {
		t.Errorf("provenance: %+v", s)
	}
	if _, note := speedOfLight("NVIDIA H200", "no/such-model", 1, ld); !strings.Contains(note, "not in the model catalog") {
		t.Errorf("unknown model: %q", note)
	}
	if _, note := speedOfLight("Mystery GPU", "Qwen/Qwen3-8B", 1, ld); !strings.Contains(note, "not in the catalog") {
		t.Errorf("unknown GPU: %q", note)
	}
	if s, _ := speedOfLight("NVIDIA H200", "Qwen/Qwen3-8B", 1, &results.Load{Runs: []results.Run{{Kind: "throughput"}}}); s != nil {
		t.Errorf("no completed requests: want nil, got %+v", s)
	}
}

package pipeline

import (
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// Issue 42: % SOL is the peak over the roofline bound at the batch the profile fixes
// (the engine's max_num_seqs) and the profile's lengths: the same whatever batch
// the run reached, so repeats agree; above 100 % it is called impossible.
func TestSpeedOfLightAtTheProfilesBatch(t *testing.T) {
	runs := func(inFlight float64) *results.Load {
		return &results.Load{Config: results.LoadConfig{PromptTokens: 256, OutputTokens: 128}, Runs: []results.Run{
			{Kind: "synchronous", OutputTokS: 90, ReqS: 0.7, E2E: results.Dist{Count: 10, Mean: 1400}, MeanPromptTokens: 250, MeanOutputTokens: 120},
			{Kind: "throughput", Concurrency: 64, OutputTokS: 4000, ReqS: 31.25, E2E: results.Dist{Count: 500, Mean: inFlight / 31.25 * 1000}, MeanPromptTokens: 250, MeanOutputTokens: 120},
		}}
	}
	b, src := solBatch(32)
	s, note := speedOfLight(nil, "NVIDIA H200", "Qwen/Qwen3-8B", 1, runs(18), b, src)
	if s == nil {
		t.Fatal(note)
	}
	g, _ := catalog.Builtin().LookupGPU("H200")
	m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
	want := roofline.ServeTokS(g, m, 32, 256, 128, 1) // the profile's batch and lengths
	if s.Batch != 32 || math.Abs(s.BoundOutputTokS-want) > 1e-9 || math.Abs(s.Percent-100*4000/want) > 1e-9 || s.Limit != "memory" || math.Abs(s.ReachedBatch-18) > 1e-9 {
		t.Errorf("got %+v, want bound %v", s, want)
	}
	if !strings.Contains(s.BatchSource, "max_num_seqs 32") || s.GPU != "H200" || s.Model != "catalog" {
		t.Errorf("provenance: %+v", s)
	}
	// Another run of the same profile that reached another batch reads the same % SOL.
	if s2, _ := speedOfLight(nil, "NVIDIA H200", "Qwen/Qwen3-8B", 1, runs(25), b, src); s2.Percent != s.Percent {
		t.Errorf("%% SOL moved with the reached batch: %.1f then %.1f", s.Percent, s2.Percent)
	}
	if b, src := solBatch(0); b != 256 || !strings.Contains(src, "max_num_seqs 256") {
		t.Errorf("batch %d (%s), want vLLM's default 256", b, src)
	}
	fast := runs(18)
	fast.Runs[1].OutputTokS = 2 * want
	if s, _ := speedOfLight(nil, "NVIDIA H200", "Qwen/Qwen3-8B", 1, fast, b, src); !s.Impossible || !strings.Contains(s.Note, "impossible") {
		t.Errorf("above the bound: %+v", s)
	}
	ld := runs(18)
	if _, note := speedOfLight(nil, "NVIDIA H200", "no/such-model", 1, ld, b, src); !strings.Contains(note, "not in the model catalog") {
		t.Errorf("unknown model: %q", note)
	}
	if _, note := speedOfLight(nil, "Mystery GPU", "Qwen/Qwen3-8B", 1, ld, b, src); !strings.Contains(note, "not in the catalog") {
		t.Errorf("unknown GPU: %q", note)
	}
	if s, _ := speedOfLight(nil, "NVIDIA H200", "Qwen/Qwen3-8B", 1, &results.Load{Runs: []results.Run{{Kind: "throughput"}}}, b, src); s != nil {
		t.Errorf("no output: want nil, got %+v", s)
	}
}

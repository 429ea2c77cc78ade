package judge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

func TestFromPlan(t *testing.T) {
	dir := t.TempDir()
	site := filepath.Join(dir, "site.yaml")
	os.WriteFile(site, []byte(`
gates:
  itl_p95_ms: null
compare:
  variance_pct: 15
reference:
  "NVIDIA H200":
    "Qwen/Qwen3-8B":
      ttft_p95_ms: 120
accelerators:
  H100:
    gates: {ttft_p95_ms: 150}
`), 0o644)
	p, err := config.Load(config.Options{Files: []string{site}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := FromPlan(p, []string{"NVIDIA H100 80GB HBM3", "NVIDIA H200"})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		gpu     string
		ttft    float64
		ttftSrc string
		itlOff  bool
	}{
		{"NVIDIA H200", 120, SourceReference, true},
		{"NVIDIA H100 80GB HBM3", 150, "accelerator:H100", true},
		{"NVIDIA L40S", 200, SourceDefault, true},
	}
	for _, tc := range tests {
		g := cfg.GatesFor(tc.gpu, "Qwen/Qwen3-8B")
		if g.TTFTP95Ms.Value == nil || *g.TTFTP95Ms.Value != tc.ttft || !hasPrefix(g.TTFTP95Ms.Source, tc.ttftSrc) {
			t.Errorf("%s: ttft %v from %q, want %v from %q", tc.gpu, ptr(g.TTFTP95Ms.Value), g.TTFTP95Ms.Source, tc.ttft, tc.ttftSrc)
		}
		if (g.ITLP95Ms.Value == nil) != tc.itlOff || !hasPrefix(g.ITLP95Ms.Source, "config:") {
			t.Errorf("%s: itl %v from %q, want disabled by the site file", tc.gpu, ptr(g.ITLP95Ms.Value), g.ITLP95Ms.Source)
		}
	}
	if v := cfg.LLMGuardsFrom().VariancePct; v != 15 {
		t.Errorf("variance %v, want 15", v)
	}
	if g := cfg.LLMGuardsFrom(); g.MinSamples != 30 || g.MinThroughputReqS != 1 || g.MinTTFTDeltaMs != 25 {
		t.Errorf("guards %+v", g)
	}
}

// The real aicr recipe: its node floor (>= 50000 over a 4-GPU node) and TTFT p99 (<= 2000) gate
// the concurrency run of each endpoint, normalized per GPU on a 4-GPU host.
func TestFromPlanAICRRecipe(t *testing.T) {
	p, err := config.Load(config.Options{Files: []string{filepath.Join("testdata", "gb200-eks-ubuntu-inference-dynamo.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := FromPlan(p, nil)
	s := summary(healthy(), healthy(), healthy(), healthy())
	for i := range s.Hosts[0].Models[0].Endpoints {
		out := 16000.0
		if i == 3 {
			out = 10000 // under 50000 × 0.9 / 4 = 11250
		}
		s.Hosts[0].Models[0].Endpoints[i].Load.Runs = append(s.Hosts[0].Models[0].Endpoints[i].Load.Runs, results.Run{Kind: RunConcurrency,
			Concurrency: 256, Requests: results.RequestCounts{Successful: 3000}, OutputTokS: out, TTFT: results.Dist{Count: 3000, P95: 1000, P99: 1240}})
	}
	Apply(s, cfg)
	for i, ep := range s.Hosts[0].Models[0].Endpoints {
		v := verdict(t, ep, "gate.aicr_throughput")
		want := ResultPass
		if i == 3 {
			want = ResultFail
		}
		if v.Result != want || !hasPrefix(v.Source, "recipe:") || *v.Threshold != 11250 {
			t.Errorf("gpu %d: %s from %q at %v (%s), want %s from the recipe at 11250", i, v.Result, v.Source, *v.Threshold, v.Reason, want)
		}
		if l := verdict(t, ep, "gate.aicr_ttft_p99"); l.Result != ResultPass || *l.Threshold != 2200 {
			t.Errorf("gpu %d ttft p99: %s at %v", i, l.Result, *l.Threshold)
		}
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Judge has the pipeline's Deps signature; Judge and Baseline judge a whole run from a plan.
func TestJudgeAndBaselineDeps(t *testing.T) {
	var _ func(*results.Summary, *config.Plan) error = Judge
	var _ func(*results.Summary, bool, bool) int = ExitCode

	dir := t.TempDir()
	site := filepath.Join(dir, "site.yaml")
	os.WriteFile(site, []byte("accelerators:\n  H200:\n    gates: {ttft_p95_ms: 30}\n"), 0o644)
	p, err := config.Load(config.Options{Files: []string{site}})
	if err != nil {
		t.Fatal(err)
	}
	s := summary(healthy(), healthy())
	if err := Judge(s, p); err != nil {
		t.Fatal(err)
	}
	v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], "gate.ttft_p95")
	if v.Result != ResultFail || !hasPrefix(v.Source, "accelerator:H200") || *v.Threshold != 30 {
		t.Errorf("accelerator gate through the plan: %+v", v)
	}
	base := "baseline.json"
	s2 := withEnv(summary(healthy(), healthy().scaled(0.3)), "vm")
	if err := Baseline(s2, summary(healthy(), healthy()), "", base, p); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, fl := range s2.Flags {
		found = found || fl.Check == CheckBaseline
	}
	if !found || s2.Baseline == nil || s2.Baseline.BaselineFile != base {
		t.Errorf("baseline breach not flagged: %+v", s2.Flags)
	}
	if err := Baseline(s2, nil, "no comparison: baseline nope.json unreadable", "nope.json", p); err != nil || !hasPrefix(s2.Baseline.Note, "no comparison") {
		t.Errorf("missing baseline: %v %+v", err, s2.Baseline)
	}
}

package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

func row(t *testing.T, bc *results.BaselineComparison, subject, metric string) results.OverheadRow {
	t.Helper()
	for _, r := range bc.Rows {
		if r.Subject == subject && r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no row %s / %s", subject, metric)
	return results.OverheadRow{}
}

func withEnv(s *results.Summary, env string) *results.Summary { s.Environment = env; return s }

func TestCompareBaselineOverheadAndStatus(t *testing.T) {
	base := summary(healthy(), healthy())
	vm := withEnv(summary(healthy().scaled(0.05), healthy().scaled(0.15)), "vm")
	k8s := withEnv(summary(healthy().scaled(0.02)), "k8s") // one GPU only
	bc := CompareBaseline(base, []*results.Summary{vm, k8s}, 10, compare.LLMGuards())
	if strings.Join(bc.Environments, ",") != "vm,k8s" {
		t.Fatalf("environments %v", bc.Environments)
	}
	subj0, subj1 := testModel+" gpu 0", testModel+" gpu 1"
	tests := []struct {
		subject, metric, env, status string
		overhead                     float64
	}{
		{subj0, MetricSustainedReqS, "vm", BaselineOK, 5},
		{subj1, MetricSustainedReqS, "vm", BaselineBreach, 15},
		{subj1, MetricPeakOutputTokS, "vm", BaselineBreach, 15},
		{subj1, MetricITLP95, "vm", BaselineBreach, 17.65},
		// TTFT +17.6 % but 7 ms: under the 25 ms floor.
		{subj1, MetricTTFTP95, "vm", BaselineOK, 17.65},
		{subj0, MetricSustainedReqS, "k8s", BaselineOK, 2},
		{subj1, MetricSustainedReqS, "k8s", BaselineMissing, 0},
		{"gpu 0", "sgemm_fp32", "vm", BaselineOK, 0},
	}
	for _, tc := range tests {
		r := row(t, bc, tc.subject, tc.metric)
		if r.Status[tc.env] != tc.status {
			t.Errorf("%s %s [%s]: status %s, want %s (note %q)", tc.subject, tc.metric, tc.env, r.Status[tc.env], tc.status, r.Notes[tc.env])
		}
		if got := r.OverheadPct[tc.env]; got < tc.overhead-0.01 || got > tc.overhead+0.01 {
			t.Errorf("%s %s [%s]: overhead %.2f %%, want %.2f %%", tc.subject, tc.metric, tc.env, got, tc.overhead)
		}
	}
	if !containsAny(bc.Caveats, "k8s: GPU count differs (baseline 2, k8s 1)") {
		t.Errorf("caveats %v lack the GPU count", bc.Caveats)
	}
	flags := BaselineFlags(bc)
	if len(flags) != 5 {
		t.Errorf("%d baseline flags, want 5 (gpu 1 sustained, peak, ITL, TPOT p95 and p50): %+v", len(flags), flags)
	}
	for _, fl := range flags {
		if !strings.Contains(fl.Subject, "gpu 1 [vm]") || !strings.Contains(fl.Reason, "beyond the 10 % tolerance") {
			t.Errorf("flag %+v", fl)
		}
	}
}

func TestOverheadStatusGuards(t *testing.T) {
	g := compare.LLMGuards()
	// fig: a per-request figure with a ±0.5 % interval (a GEMM figure, n = 0, has none).
	fig := func(v float64, n int, reqS float64) figure {
		f := figure{Value: v, Samples: n, ReqS: reqS}
		if n > 0 {
			f.CI = ci(v*0.995, v*1.005)
		}
		return f
	}
	tests := []struct {
		name      string
		metric    string
		base, env figure
		higher    bool
		want      string
	}{
		{"11 % slower breaches", MetricSustainedReqS, fig(40, 900, 40), fig(35.6, 900, 35.6), true, BaselineBreach},
		// Issue 42: undecided is never ok: a gap on the margin whose interval reaches past it.
		{"exactly 10 %, its interval reaching past: low confidence", MetricSustainedReqS, fig(40, 900, 40), fig(36, 900, 36), true, BaselineLowConfidence},
		{"8 % slower, interval inside the margin: ok", MetricSustainedReqS, fig(40, 900, 40), fig(36.8, 900, 36.8), true, BaselineOK},
		{"faster is ok", MetricSustainedReqS, fig(40, 900, 40), fig(44, 900, 44), true, BaselineOK},
		{"few samples: low confidence", MetricSustainedReqS, fig(0.4, 4, 0.4), fig(0.3, 3, 0.3), true, BaselineLowConfidence},
		{"tiny denominator", MetricSustainedReqS, fig(2, 100, 2), fig(1.5, 100, 1.5), true, BaselineLowConfidence},
		{"TTFT under 25 ms is not material", MetricTTFTP95, fig(40, 900, 0), fig(60, 900, 0), false, BaselineOK},
		{"TTFT beyond 25 ms breaches", MetricTTFTP95, fig(100, 900, 0), fig(130, 900, 0), false, BaselineBreach},
		{"env lower bound holds a throughput breach", MetricPeakOutputTokS, fig(10000, 900, 40),
			figure{Value: 7000, Samples: 900, ReqS: 27, LowerBound: true}, true, BaselineLowerBound},
		{"baseline lower bound cannot confirm ok", MetricPeakOutputTokS, figure{Value: 10000, Samples: 900, ReqS: 40, LowerBound: true},
			fig(9800, 900, 39), true, BaselineLowerBound},
		{"baseline lower bound, env still far below: breach", MetricPeakOutputTokS, figure{Value: 10000, Samples: 900, ReqS: 40, LowerBound: true, CI: ci(9950, 10050)},
			fig(7000, 900, 27), true, BaselineBreach},
		// Issue 35: the overhead's interval must lie beyond the tolerance, not only its value.
		{"11 % slower, interval reaching within 10 %: low confidence", MetricSustainedReqS, fig(40, 900, 40),
			figure{Value: 35.6, Samples: 900, ReqS: 35.6, CI: ci(34.5, 36.7)}, true, BaselineLowConfidence},
		{"11 % slower without an interval: low confidence", MetricSustainedReqS, figure{Value: 40, Samples: 900, ReqS: 40},
			figure{Value: 35.6, Samples: 900, ReqS: 35.6}, true, BaselineLowConfidence},
		{"overlapping CIs", MetricITLP95, figure{Value: 10, CI: ci(8, 13)}, figure{Value: 12, CI: ci(11, 14)}, false, BaselineLowConfidence},
		{"GEMM has no sample guard", "sgemm_fp32", fig(51, 0, 0), fig(40, 0, 0), true, BaselineBreach},
	}
	for _, tc := range tests {
		if got, note, _ := overheadStatus(tc.metric, tc.base, tc.env, tc.higher, 10, g); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, note, tc.want)
		}
	}
}

func TestCompareBaselineCaveats(t *testing.T) {
	base := summary(healthy(), healthy())
	env := withEnv(summary(healthy(), healthy().scaled(0.3)), "vm")
	env.Meta.DriverVersion, env.Meta.EngineVersion = "580.65.06", "0.11.1"
	env.Meta.LoadProfile.MaxDuration = results.Duration(40 * time.Second)
	env.Hosts[0].Models[0].Endpoints[1].Load.Saturation.Unsaturated = true
	env.Hosts[0].Models[0].Endpoints[1].Load.Saturation.Reason = "last rungs still climbing"
	bc := CompareBaseline(base, []*results.Summary{env}, 10, compare.LLMGuards())
	for _, want := range []string{
		"vm: driver version differs (baseline 570.86.15, vm 580.65.06)",
		"vm: engine version differs (baseline 0.11.0, vm 0.11.1)",
		"vm: load profile differs (max_duration 20s vs 40s)",
		"vm: Qwen/Qwen3-8B gpu 1 sweep is a lower bound (last rungs still climbing)",
	} {
		if !containsAny(bc.Caveats, want) {
			t.Errorf("caveats lack %q: %v", want, bc.Caveats)
		}
	}
	if r := row(t, bc, testModel+" gpu 1", MetricSustainedReqS); r.Status["vm"] != BaselineLowerBound {
		t.Errorf("a 30 %% gap against a lower-bound sweep: %s, want lower_bound", r.Status["vm"])
	}
	// Sync latency stays compared on the lower-bound side.
	if r := row(t, bc, testModel+" gpu 1", MetricITLP95); r.Status["vm"] != BaselineBreach {
		t.Errorf("ITL on a lower-bound sweep: %s, want breach", r.Status["vm"])
	}
}

func TestCompareBaselineDegrades(t *testing.T) {
	bc := CompareBaseline(nil, []*results.Summary{summary(healthy())}, 10, compare.LLMGuards())
	if !strings.HasPrefix(bc.Note, "no comparison") || len(bc.Rows) != 0 {
		t.Errorf("nil baseline: %+v", bc)
	}
	empty := &results.Summary{SchemaVersion: results.SchemaVersion}
	bc = CompareBaseline(empty, []*results.Summary{summary(healthy())}, 10, compare.LLMGuards())
	if !strings.HasPrefix(bc.Note, "no comparison") {
		t.Errorf("empty baseline: %+v", bc)
	}
	other := summary(healthy())
	other.Hosts[0].Models[0].Model = "other/model"
	other.Hosts[0].Health = nil
	base := summary(healthy())
	base.Hosts[0].Health = nil
	bc = CompareBaseline(base, []*results.Summary{withEnv(other, "vm")}, 10, compare.LLMGuards())
	if !containsAny(bc.Caveats, "vm: no subject in common with the baseline (baseline Qwen/Qwen3-8B gpu 0; vm other/model gpu 0)") {
		t.Errorf("caveats %v", bc.Caveats)
	}
	two := CompareBaseline(summary(healthy()), []*results.Summary{withEnv(summary(healthy()), "vm"), withEnv(summary(healthy()), "vm"), withEnv(summary(healthy()), "")}, 10, compare.LLMGuards())
	if strings.Join(two.Environments, ",") != "vm,vm (2),env3" {
		t.Errorf("environment names %v", two.Environments)
	}
}

func TestApplyFlagsBaselineBreach(t *testing.T) {
	base := summary(healthy())
	s := withEnv(summary(healthy().scaled(0.2)), "vm")
	s.Baseline = CompareBaseline(base, []*results.Summary{s}, 10, compare.LLMGuards())
	Apply(s, DefaultConfig())
	if s.Status != results.StatusFlag {
		t.Fatalf("status %s, want flag", s.Status)
	}
	n := 0
	for _, fl := range s.Flags {
		if fl.Check == CheckBaseline {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no baseline flag in %+v", s.Flags)
	}
}

func containsAny(list []string, sub string) bool {
	for _, x := range list {
		if strings.Contains(x, sub) {
			return true
		}
	}
	return false
}

func TestCompareBaselineMatchesFleetsHostByHost(t *testing.T) {
	mk := func(env string, a, b perf) *results.Summary {
		s1, s2 := summary(a, healthy()), summary(b, healthy())
		s1.Environment = env
		h1, h2 := s1.Hosts[0], s2.Hosts[0]
		h1.Name, h2.Name = "node1", "node2"
		s1.Hosts = []results.Host{h1, h2}
		return s1
	}
	base := mk("baremetal", healthy(), healthy())
	// In the VMs, node2's GPU 0 is 15 % slower; node1's is not.
	vm := mk("vm", healthy(), healthy().scaled(0.15))
	bc := CompareBaseline(base, []*results.Summary{vm}, 10, compare.LLMGuards())
	if r := row(t, bc, "node2: "+testModel+" gpu 0", MetricSustainedReqS); r.Status["vm"] != BaselineBreach {
		t.Fatalf("node2 gpu 0: %s", r.Status["vm"])
	}
	if r := row(t, bc, "node1: "+testModel+" gpu 0", MetricSustainedReqS); r.Status["vm"] != BaselineOK {
		t.Fatalf("node1 gpu 0: %s", r.Status["vm"])
	}
	if containsAny(bc.Caveats, "appears on more than one host") {
		t.Fatalf("fleet subjects collided: %v", bc.Caveats)
	}
	// Hosts named differently on the two sides share nothing: said, not silently matched.
	other := mk("vm", healthy(), healthy())
	other.Hosts[0].Name, other.Hosts[1].Name = "vm-a", "vm-b"
	bc = CompareBaseline(base, []*results.Summary{other}, 10, compare.LLMGuards())
	if !containsAny(bc.Caveats, "no subject in common") {
		t.Fatalf("caveats %v", bc.Caveats)
	}
}

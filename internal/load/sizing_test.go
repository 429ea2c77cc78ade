package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A synchronous rung runs past max_duration until min_samples requests completed.
func TestSyncRungSizedByCompletions(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 4 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: kindSynchronous, OutputTokens: 100,
		MaxDuration: results.Duration(500 * time.Millisecond), MinSamples: 6, MaxRungDuration: results.Duration(30 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if r.Requests.Successful < 6 || r.Sizing == nil || r.Sizing.Cut || r.TTFT.Count < 6 {
		t.Fatalf("requests %+v sizing %+v: want ≥ 6 completed, not cut", r.Requests, r.Sizing)
	}
	if r.Sizing.ShortRequests != 0 {
		t.Errorf("a synchronous profile shortened %d requests: only a sweep's synchronous rung may", r.Sizing.ShortRequests)
	}
}

// The cut-rung rule in the load generator: the cap ends a rung short of its samples, and it says so.
func TestRungCutByMaxRungDuration(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 4 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: kindSynchronous, OutputTokens: 100,
		MaxDuration: results.Duration(300 * time.Millisecond), MinSamples: 500, MaxRungDuration: results.Duration(1500 * time.Millisecond)}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if r.Sizing == nil || !r.Sizing.Cut || !strings.Contains(r.Sizing.Reason, "load.max_rung_duration") || r.CutReason() == "" {
		t.Fatalf("sizing %+v: want cut, naming load.max_rung_duration", r.Sizing)
	}
	if r.WindowSeconds < 0.8 || r.WindowSeconds > 3 { // the warm-up request comes first
		t.Errorf("window %.2f s: want about the 1.5 s cap", r.WindowSeconds)
	}
}

// The over-capacity rule: against a slow engine (each request outlasts every rung but the
// synchronous one), the sweep is measured, not failed. The probe completes nothing but streams: past
// the knee, a finding; the ladder sits at or below the knee's rate and the sweep is saturated; the
// synchronous rung gets its samples from shorter requests with the same prompt.
func TestSweepOverCapacityIsMeasured(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 10 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 2, OutputTokens: 300,
		MaxDuration: results.Duration(500 * time.Millisecond), MinSamples: 10, MaxRungDuration: results.Duration(60 * time.Second)})
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("a slow engine failed the sweep: %v", err)
	}
	sync, probe := l.Runs[0], l.Runs[1]
	if sync.Requests.Successful < 10 || sync.Sizing == nil || sync.Sizing.Cut || sync.Sizing.ShortRequests == 0 || sync.Sizing.ShortOutputTokens >= 300 {
		t.Errorf("sync requests %+v sizing %+v: want ≥ 10 completed, the later ones shorter", sync.Requests, sync.Sizing)
	}
	if probe.Kind != kindThroughput || probe.Requests.Successful != 0 || probe.Requests.Streamed < 15 || probe.OutputTokS <= 0 {
		t.Fatalf("probe %s requests %+v output %.0f: want none completed, the 15 measured streaming", probe.Kind, probe.Requests, probe.OutputTokS)
	}
	sat := l.Saturation
	if sat == nil || sat.Knee == nil || !sat.Knee.PastKnee || sat.LowerBound() || len(sat.Knee.Probes) != 1 {
		t.Fatalf("saturation %+v knee %+v: want past the knee at the first probe, saturated", sat, sat.Knee)
	}
	ex := &executor{cfg: Defaults(o.Config)}
	if want := ex.rungRate(probe); sat.Knee.LadderTopReqS != want || l.Runs[len(l.Runs)-1].TargetRate > want*1.0000001 {
		t.Errorf("ladder top %v, last rung %v: want at the knee's rate %v", sat.Knee.LadderTopReqS, l.Runs[len(l.Runs)-1].TargetRate, want)
	}
	if len(l.Runs) != 4 || l.SustainedReqS <= 0 || l.PeakOutputTokS <= 0 {
		t.Errorf("%d runs, sustained %v, peak %v", len(l.Runs), l.SustainedReqS, l.PeakOutputTokS)
	}
}

package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// blockedLoad is a load whose synchronous rung ran three blocks of 2 s, the first opening at
// offset seconds after t0 and the others at 20 s and 40 s after it (plus shift for block 3).
func blockedLoad(t0 time.Time, offset, shift float64, tpot []float64) *results.Load {
	return &results.Load{StartedAt: t0.Add(time.Duration(offset * float64(time.Second))), Runs: []results.Run{{
		Kind: RunSynchronous,
		Repeat: &results.Repeat{Blocks: 3, WindowStartS: []float64{0, 20, 40 + shift}, WindowSeconds: []float64{2, 2, 2},
			Figures: []results.FigureRepeat{{Figure: MetricTPOTP50, Blocks: tpot}}},
	}}}
}

func TestAlignedBlocks(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a, b := []float64{7, 8.7, 7.7}, []float64{7.8, 9.6, 8.5}
	// Loads started 0.5 s apart: every block's windows overlap by 1.5 of 2 s.
	loads := []*results.Load{blockedLoad(t0, 0, 0, a), blockedLoad(t0, 0.5, 0, b)}
	got := alignedBlocks(loads, MetricTPOTP50, true)
	if len(got) != 2 || got[1][2] != 8.5 {
		t.Fatalf("aligned blocks: %v", got)
	}
	if alignedBlocks(loads, MetricTPOTP50, false) != nil {
		t.Fatal("GPUs loaded one after another paired by their blocks")
	}
	if alignedBlocks(loads, MetricITLP95, true) != nil {
		t.Fatal("a figure without blocks paired")
	}
	// The second load's third block ran 1.5 s later: the windows overlap by 0.5 s, less than half.
	loads[1] = blockedLoad(t0, 0.5, 1.5, b)
	if got := alignedBlocks(loads, MetricTPOTP50, true); got != nil {
		t.Fatalf("blocks that ran apart paired: %v", got)
	}
}

// A gate left undecided by an interval the engine's drift widened belongs to the engine, and says
// so: the peak read ±2 % over its requests, and ±23 % once the drift the blocks saw is in it (the
// blocks' ±13 % for their mean, × √3 for a reading at one moment).
func TestGateUndecidedByTheEngineDrift(t *testing.T) {
	l := &results.Load{Runs: []results.Run{{Kind: RunSynchronous, Repeat: &results.Repeat{Blocks: 3,
		CI: &results.Intervals{OutputTokS: &results.Interval{Lo: 100, Hi: 130, Level: 0.95}}}}}}
	peak := compare.Figure{Value: 3100, Samples: 130, CI: &results.Interval{Lo: 3040, Hi: 3160, Level: 0.95}}
	f := acrossRuns(l, MetricPeakOutputTokS, peak)
	if !(f.DriftPct > 22 && f.DriftPct < 23) || !(f.CI.Lo < 2400) {
		t.Fatalf("across runs: %+v %+v", f, f.CI)
	}
	res, why := compare.Gate(f, 3364, false, 10)
	if res != compare.Inconclusive || !strings.Contains(why, compare.EngineDrifted) || !strings.Contains(why, "±23 %") {
		t.Fatalf("gate: %s: %s", res, why)
	}
	ep := &results.Endpoint{GPUs: []int{0}, Verdicts: []results.Verdict{{Check: CheckExpected, Result: ResultInconclusive, Rule: "peak output tok/s ≥ 3364", Reason: why, Source: "roofline"}}}
	fs := endpointFindings("h", "m", ep)
	if len(fs) != 1 || fs[0].Layer != results.LayerEngine || fs[0].Action != results.ActionRerun {
		t.Fatalf("findings %+v", fs)
	}
	// Without the drift it is the requests' spread, which more of them narrow: the client's to rerun.
	res, why = compare.Gate(compare.Figure{Value: 3100, Samples: 130, CI: &results.Interval{Lo: 3000, Hi: 3400, Level: 0.95}}, 3364, false, 10)
	ep.Verdicts[0].Reason = why
	if fs := endpointFindings("h", "m", ep); res != compare.Inconclusive || len(fs) != 1 || fs[0].Layer != results.LayerClient {
		t.Fatalf("without drift: %s %+v", res, fs)
	}
}

// An expected-throughput miss on a GPU that passed its own checks is the GPU's, unless the engine's
// speed moved between the run's blocks by more than the gate's margin: then it is the engine's.
func TestExpectedMissOfADriftingEngineIsTheEngines(t *testing.T) {
	for _, tc := range []struct {
		spread float64
		layer  string
		action string
	}{{18, results.LayerEngine, results.ActionFixEngine}, {4, results.LayerGPU, results.ActionResetGPU}} {
		ep := &results.Endpoint{GPUs: []int{0}, Load: &results.Load{Runs: []results.Run{{Kind: RunSynchronous,
			Repeat: &results.Repeat{Blocks: 3, Figures: []results.FigureRepeat{{Figure: speedFigure, Blocks: []float64{100, 118, 104}, SpreadPct: tc.spread}}}}}},
			Flags: []results.Flag{{Check: CheckExpected, Reason: "peak output tok/s 2900 < 3364"}}}
		gateLayers(ep, map[int]bool{0: true}, 10)
		f := ep.Flags[0]
		if f.Layer != tc.layer || f.Action != tc.action {
			t.Errorf("engine moved %g %%: %s/%s, want %s/%s (%s)", tc.spread, f.Layer, f.Action, tc.layer, tc.action, f.Reason)
		}
		if tc.layer == results.LayerEngine && !strings.Contains(f.Reason, "moved 18 %") {
			t.Errorf("reason: %s", f.Reason)
		}
	}
}

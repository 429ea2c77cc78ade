package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// slowSim is the simulator's scheduler-bound engine (transformers' continuous batching on an 8B:
// 30 ms a step + 2 ms per sequence in it, sim.step_overhead and sim.seq_overhead), served over HTTP.
func slowSim(t *testing.T, maxNumSeqs int) *sim.Server {
	t.Helper()
	srv, err := sim.Listen(sim.Config{GPU: "H100", Model: testModel,
		Engine: sim.EngineConfig{StepOverhead: 30 * time.Millisecond, SeqOverhead: 2 * time.Millisecond, MaxNumSeqs: maxNumSeqs}}, "127.0.0.1:0")
	if err != nil {
		t.Skipf("sim: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// steadyRungs checks the rule on every probe and constant rung: measured in its steady state, with
// its window opened at the level's onset, or marked transient with its reason.
func steadyRungs(t *testing.T, l *results.Load) (steady, transient int) {
	t.Helper()
	for i, r := range l.Runs[1:] {
		st := r.Steady
		if st == nil || st.Reason == "" {
			t.Fatalf("rung %d (%s): steady %+v: not measured by the steady-state rule", i+2, r.Label(), st)
		}
		t.Logf("rung %d (%s): window %.1f s, %d completed, %d incomplete, %.0f tok/s: %s", i+2, r.Label(), r.WindowSeconds, r.Requests.Successful, r.Requests.Incomplete, r.OutputTokS, st.Reason)
		if st.Transient {
			transient++
			if !strings.Contains(st.Reason, "transient") || !strings.Contains(st.Reason, "load.max_rung_duration") {
				t.Errorf("rung %d: transient without its reason: %q", i+2, st.Reason)
			}
			continue
		}
		steady++
		if st.OnsetS <= 0 && r.Kind == kindConstant {
			t.Errorf("rung %d (%s): levelled at %v s: an open loop levels no sooner than its first completions", i+2, r.Label(), st.OnsetS)
		}
	}
	return steady, transient
}

// A slow engine whose requests outlast max_duration (3 s a request at 16 in flight, 2 s rungs): each
// rung's window grows until its in-flight count and output rate levelled and requests completed in
// it. The old rule took the probe's "nothing completed in its window" for a knee and measured every
// constant rung on its ramp.
func TestSlowEngineRungsGrowUntilSteady(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()          // waits on a slow engine: its wall time, not the CPU's
	srv := slowSim(t, 16) // its batch is full at the probe's concurrency: the ladder's top is past capacity
	o := opts(srv.URL(), results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 2, PromptTokens: 128, OutputTokens: 48,
		MaxDuration: results.Duration(2 * time.Second), MinSamples: 10, MaxRungDuration: results.Duration(40 * time.Second)})
	o.MaxNumSeqs = 16 // the knee search stays at the first probe: the test is about its length
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	steady, _ := steadyRungs(t, l)
	probe := l.Runs[1]
	if probe.TransientReason() != "" || probe.Requests.Successful+probe.Requests.Warmup == 0 || probe.Steady.OnsetS+probe.WindowSeconds <= 2 {
		t.Errorf("probe %+v window %.1f s, steady %+v: want it grown past the 2 s max_duration until requests completed in a level window", probe.Requests, probe.WindowSeconds, probe.Steady)
	}
	if k := l.Saturation.Knee; strings.Contains(k.Reason, "completed no request") {
		t.Errorf("knee %q: nothing completed in a window is not a knee", k.Reason)
	}
	if steady < 2 {
		t.Errorf("%d of %d rungs levelled: want the probe and at least one constant rung steady", steady, len(l.Runs)-1)
	}
}

// A slow engine that never levels within the cap (5 s a request alone, 15 s at 32 in flight, rungs
// capped at 8 s): its probe and constant rungs are transient with their reason, and the knee search
// takes no knee from a probe that completed nothing.
func TestSlowEngineNeverLevelsIsTransient(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel() // waits on a slow engine: its wall time, not the CPU's
	srv := slowSim(t, 0)
	o := opts(srv.URL(), results.LoadConfig{Profile: "sweep", MaxConcurrency: 32, Rates: 2, PromptTokens: 128, OutputTokens: 160,
		MaxDuration: results.Duration(2 * time.Second), MinSamples: 8, MaxRungDuration: results.Duration(8 * time.Second)})
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	_, transient := steadyRungs(t, l)
	probe := l.Runs[1]
	if probe.TransientReason() == "" || probe.Requests.Successful != 0 {
		t.Errorf("probe %+v, steady %+v: want transient (nothing can complete in 8 s)", probe.Requests, probe.Steady)
	}
	k := l.Saturation.Knee
	if k.PastKnee || !strings.Contains(k.Reason, "did not reach a steady state") || len(k.Probes) != 1 {
		t.Errorf("knee %+v: a transient probe is no knee, and no search goes past it", k)
	}
	if transient < 2 {
		t.Errorf("%d transient rungs: want the probe and the constant rungs", transient)
	}
	if notes := l.RungNotes(); len(notes) < transient {
		t.Errorf("rung notes %q: want one per transient rung", notes)
	}
}

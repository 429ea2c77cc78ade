package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The roll-up rule: a GPU whose gates could not decide is inconclusive, not ok, and so are its
// model, host and run; inconclusive ranks between ok and flag.
func TestRollUpInconclusive(t *testing.T) {
	few := healthy()
	s := summary(few)
	sync := &s.Hosts[0].Models[0].Endpoints[0].Load.Runs[0]
	sync.Requests.Successful, sync.TTFT.Count, sync.ITL.Count, sync.TPOT.Count = 4, 4, 4*255, 4 // today's `run --sim`: n=4
	Apply(s, DefaultConfig())
	ep := s.Hosts[0].Models[0].Endpoints[0]
	if v := verdict(t, ep, "gate.ttft_p95"); v.Result != ResultInconclusive {
		t.Fatalf("ttft verdict %s with 4 samples, want inconclusive", v.Result)
	}
	for what, st := range map[string]results.Status{"endpoint": ep.Status, "model": s.Hosts[0].Models[0].Status, "host": s.Hosts[0].Status, "run": s.Status} {
		if st != results.StatusInconclusive {
			t.Errorf("%s: %s, want inconclusive (every gate undecided is not a pass)", what, st)
		}
	}
	if ExitCode(s, false, false) != 0 || ExitCode(s, false, true) != 1 {
		t.Errorf("exit codes %d, %d: want 0 without --fail-on-inconclusive and 1 with", ExitCode(s, false, false), ExitCode(s, false, true))
	}

	// The same figures with enough samples decide: ok (beside a peer, which judges its throughput).
	s = summary(healthy(), healthy())
	Apply(s, DefaultConfig())
	if s.Status != results.StatusOK {
		t.Errorf("decided run: %s, want ok", s.Status)
	}

	// Ranked: flag > inconclusive > ok.
	if results.Worse(results.StatusInconclusive, results.StatusOK) != results.StatusInconclusive ||
		results.Worse(results.StatusInconclusive, results.StatusFlag) != results.StatusFlag ||
		results.Worse(results.StatusFailed, results.StatusInconclusive) != results.StatusFailed {
		t.Error("inconclusive is not ranked between ok and flag")
	}
	slow := healthy()
	slow.syncTTFT = 400
	s = summary(slow, healthy())
	inc := &s.Hosts[0].Models[0].Endpoints[1].Load.Runs[0]
	inc.Requests.Successful, inc.TTFT.Count, inc.ITL.Count, inc.TPOT.Count = 4, 4, 4*255, 4
	Apply(s, DefaultConfig())
	if s.Hosts[0].Models[0].Endpoints[1].Status != results.StatusInconclusive || s.Status != results.StatusFlag {
		t.Errorf("flag beside inconclusive: endpoint %s, run %s; want inconclusive and flag", s.Hosts[0].Models[0].Endpoints[1].Status, s.Status)
	}
}

// The cut-rung rule: a rung the cap cut before it had its samples makes its gates inconclusive,
// naming load.max_rung_duration, whatever its figures read.
func TestCutRungInconclusive(t *testing.T) {
	s := summary(healthy(), healthy())
	sync := &s.Hosts[0].Models[0].Endpoints[0].Load.Runs[0]
	sync.Sizing = &results.RungSizing{MinSamples: 30, Cap: results.Duration(3 * time.Minute), Completed: 12, Cut: true,
		Reason: "cut by load.max_rung_duration (3m0s) with 12 of the 30 completed requests compare.min_samples asks for"}
	Apply(s, DefaultConfig())
	ep := s.Hosts[0].Models[0].Endpoints[0]
	for _, check := range []string{"gate.ttft_p95", "gate.itl_p95"} {
		v := verdict(t, ep, check)
		if v.Result != ResultInconclusive || !strings.Contains(v.Reason, "load.max_rung_duration") {
			t.Errorf("%s on a cut rung: %s (%s), want inconclusive naming load.max_rung_duration", check, v.Result, v.Reason)
		}
	}
	if ep.Status != results.StatusInconclusive || len(ep.Flags) != 0 {
		t.Errorf("endpoint %s flags %v, want inconclusive and no flag", ep.Status, ep.Flags)
	}
	// Not cut (it ran until its samples): decided.
	sync.Sizing.Cut, sync.Sizing.Completed = false, 40
	Apply(s, DefaultConfig())
	if ep := s.Hosts[0].Models[0].Endpoints[0]; ep.Status != results.StatusOK {
		t.Errorf("sized rung that was not cut: %s, want ok", ep.Status)
	}
}

// The over-capacity rule for the judge: a throughput rung that completed nothing but streamed
// tokens from 128 requests still has 128 requests behind its output tok/s.
func TestThroughputSamplesCountStreamed(t *testing.T) {
	l := sweepLoad(healthy())
	l.Runs = l.Runs[:2]
	thr := &l.Runs[1]
	thr.Requests = results.RequestCounts{Successful: 0, Incomplete: 128, Streamed: 128}
	f := throughputFigure(l, l.SustainedReqS)
	if f.Samples != 128 {
		t.Errorf("samples %d behind a rung whose 128 requests streamed, want 128", f.Samples)
	}
}

// The steady-state rule: a sustained-throughput figure read on a rung that never levelled (a
// transient: the ramp of a slow engine's open loop) decides no gate, met or missed, and says why;
// the same figure from a levelled rung decides.
func TestTransientRungDecidesNoGate(t *testing.T) {
	for _, floor := range []float64{30, 50} { // met, missed
		cfg := DefaultConfig()
		cfg.Gates.MinThroughputReqS = Limit{Value: fp(floor), Source: "flag"}
		s := summary(healthy())
		l := s.Hosts[0].Models[0].Endpoints[0].Load
		peak := PeakRun(l)
		peak.Steady = &results.RungSteady{PlannedS: 20, Cap: results.Duration(3 * time.Minute), Transient: true,
			Reason: "transient: never levelled: over the last 90s the in-flight count went 12.0 → 25.0"}
		Apply(s, cfg)
		ep := s.Hosts[0].Models[0].Endpoints[0]
		if v := verdict(t, ep, "gate.sustained_req_s"); v.Result != ResultInconclusive || !strings.Contains(v.Reason, "never levelled") {
			t.Errorf("floor %g on a transient peak rung: %s (%s), want inconclusive with the rung's reason", floor, v.Result, v.Reason)
		}
		if ep.Status != results.StatusInconclusive {
			t.Errorf("floor %g: endpoint %s, want inconclusive", floor, ep.Status)
		}
		peak.Steady.Transient = false
		Apply(s, cfg)
		if v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], "gate.sustained_req_s"); v.Result == ResultInconclusive {
			t.Errorf("floor %g on a levelled rung: %s (%s), want decided", floor, v.Result, v.Reason)
		}
	}
}

// A disruption (the engine's pod preempted for higher-priority work, a host's job cancelled by
// someone) is not evidence about the GPU: the endpoint, its GPU, the host and the run are
// inconclusive, the GPU's verdict says why and to run again; the same error without it fails.
func TestDisruptionIsInconclusiveNotFailed(t *testing.T) {
	s := summary(healthy(), healthy())
	ep := &s.Hosts[0].Models[0].Endpoints[1]
	ep.Load, ep.Status = nil, results.StatusInconclusive
	ep.Error = "serve: engine not ready: pod engine-0-0-1: PreemptionByScheduler: preempting"
	ep.Disruption = "pod engine-0-0-1 preempted by the scheduler for higher-priority work (preempting)"
	Apply(s, DefaultConfig())
	if ep.Status != results.StatusInconclusive || s.Hosts[0].Status != results.StatusInconclusive || s.Status != results.StatusInconclusive {
		t.Fatalf("endpoint %s, host %s, run %s; want inconclusive", ep.Status, s.Hosts[0].Status, s.Status)
	}
	g := s.Hosts[0].GPUs[1]
	if g.Status != results.StatusInconclusive || !strings.Contains(strings.Join(g.Why, " "), "preempted by the scheduler") || !strings.Contains(strings.Join(g.Why, " "), "run again") {
		t.Fatalf("gpu 1 %s why %q", g.Status, g.Why)
	}
	// A host whose run was cancelled under it: inconclusive too.
	s = summary(healthy())
	s.Hosts[0].Error, s.Hosts[0].Disruption = "run failed: job 41 cancelled", "job 41 cancelled by alice"
	Apply(s, DefaultConfig())
	if s.Hosts[0].Status == results.StatusFailed {
		t.Fatalf("a disrupted host: %s", s.Hosts[0].Status)
	}
	// Without the disruption the same error fails.
	s = summary(healthy(), healthy())
	ep = &s.Hosts[0].Models[0].Endpoints[1]
	ep.Load, ep.Error = nil, "serve: engine not ready: pod engine-0-0-1: CrashLoopBackOff"
	Apply(s, DefaultConfig())
	if ep.Status != results.StatusFailed || s.Status != results.StatusFailed {
		t.Fatalf("a crash: endpoint %s run %s, want failed", ep.Status, s.Status)
	}
}

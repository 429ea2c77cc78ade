package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A slow engine is measured, never failed for being slow, and never judged on a transient. The
// simulator's scheduler-bound engine (sim.step_overhead, sim.seq_overhead: transformers' continuous
// batching on an 8B, 30 ms + 2 ms per sequence a step) under the seed's default profile's shape
// (512-token prompts, max concurrency 128), with shorter rungs, fewer rates, 8 samples and a 15 s
// load.max_rung_duration so that it fits a unit test: a 64-token request at concurrency 128
// needs ~20 s, so the probe cannot level within the cap (the constant rungs, whose requests need
// seconds each, may or may not). Each is marked transient with its reason, the knee search takes no knee
// from a probe that completed nothing, the sustained-throughput gate (set here) is inconclusive
// rather than decided on a ramp, the synchronous rung gets its 8 samples from shorter requests,
// and the run is not failed.
func TestSlowEngineDefaultProfileIsNeverJudgedOnATransient(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute and a half against the simulator's slow engine")
	}
	t.Parallel()
	p, err := config.Load(config.Options{Sets: []string{"backend=sim", "sim.gpus=1", "sim.step_overhead=30ms", "sim.seq_overhead=2ms",
		"sim.max_num_seqs=256", "load.prompt_tokens=512", "load.output_tokens=64", "load.max_concurrency=128",
		"load.max_duration=4s", "load.rates=3", "load.max_rung_duration=15s", "compare.min_samples=8", "gates.min_throughput_req_s=0.01",
		"output.dir=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	ep := s.Hosts[0].Models[0].Endpoints[0]
	if ep.Load == nil || len(ep.Load.Runs) < 3 {
		t.Fatalf("endpoint %s (%s): no load", ep.Status, ep.Error)
	}
	l := ep.Load
	sync, probe := l.Runs[0], l.Runs[1]
	for _, v := range ep.Verdicts {
		t.Logf("%s: %s: %s", v.Check, v.Result, v.Reason)
	}
	// A slow engine is never flagged or failed for being slow: a gate it cannot meet here is the
	// sustained one on a transient (inconclusive), and its throughput has no reference (one GPU, no
	// peer, another engine than the one whose healthy share is known: "throughput not judged").
	for _, v := range ep.Verdicts {
		if v.Result == "fail" {
			t.Errorf("%s: %s (%s)", v.Check, v.Result, v.Reason)
		}
	}
	if s.Status == results.StatusFailed || ep.Status == results.StatusFailed || l.Error != "" {
		t.Errorf("status %s, endpoint %s, load error %q: a slow engine is never failed", s.Status, ep.Status, l.Error)
	}
	if sync.Requests.Successful < 8 || sync.TTFT.Count < 8 || sync.Sizing == nil || sync.Sizing.Cut {
		t.Errorf("sync: %+v sizing %+v: want ≥ 8 samples, not cut", sync.Requests, sync.Sizing)
	}
	transient := 0
	for i, r := range l.Runs[1:] {
		if r.Steady == nil || r.Steady.Reason == "" {
			t.Fatalf("rung %d (%s): steady %+v: not measured by the steady-state rule", i+2, r.Label(), r.Steady)
		}
		t.Logf("rung %d (%s): %s", i+2, r.Label(), r.Steady.Reason)
		if r.Steady.Transient {
			transient++
		}
	}
	if probe.TransientReason() == "" || probe.OutputTokS <= 0 {
		t.Errorf("probe at c=128: %+v, %.0f tok/s, steady %+v: want transient (each request outlasts the cap), tokens counted", probe.Requests, probe.OutputTokS, probe.Steady)
	}
	if k := l.Saturation.Knee; k == nil || k.PastKnee || !strings.Contains(k.Reason, "did not reach a steady state") {
		t.Errorf("knee %+v: nothing completed in a window is not a knee", k)
	}
	// The rule: a gate fed by a transient rung decides nothing.
	for _, v := range ep.Verdicts {
		if v.Check != "gate.sustained_req_s" {
			continue
		}
		if peak := judge.PeakRun(l); peak.TransientReason() != "" && v.Result != judge.ResultInconclusive {
			t.Errorf("sustained req/s decided (%s) on the transient %s rung: %s", v.Result, peak.Label(), v.Reason)
		}
	}
	notes := 0
	for _, c := range s.Caveats {
		if strings.Contains(c, "transient") {
			notes++
		}
	}
	if notes != transient || transient == 0 {
		t.Errorf("%d transient rungs, %d caveats naming one: %q", transient, notes, s.Caveats)
	}
}

package main

import (
	"slices"
	"testing"

	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 55: an engine whose speed drifts over the run (sim.engine_drift_pct; the GPU is the same)
// gives two runs of one GPU whose gated intervals overlap and neither flags the GPU: the synchronous
// rung runs in blocks spread over the load, and the intervals a rerun is judged by
// (repeat.ci) cover the spread between them.
func TestEngineDriftRepeatsBetweenRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	args := []string{"--sim-gpus", "1", "--set", "sim.engine_drift_pct=25", "--set", "history.enabled=false", "--set", "load.rates=5"}
	var syncs []*results.Run
	var status []results.Status
	var texts []string
	for range 2 {
		_, text, s := runSim(t, args...)
		ep := s.Hosts[0].Models[0].Endpoints[0]
		if ep.Load == nil || len(ep.Load.Runs) == 0 || ep.Load.Runs[0].Kind != "synchronous" {
			t.Fatalf("no synchronous rung:\n%s", text)
		}
		r := &ep.Load.Runs[0]
		if r.Repeat == nil || r.Repeat.Blocks != load.SyncBlocks || len(r.Repeat.StartS) != load.SyncBlocks || r.Repeat.CI == nil {
			t.Fatalf("synchronous rung not in %d blocks with their intervals: %+v\n%s", load.SyncBlocks, r.Repeat, text)
		}
		if !slices.IsSorted(r.Repeat.StartS) || r.Repeat.StartS[load.SyncBlocks-1]-r.Repeat.StartS[0] < 10 {
			t.Errorf("blocks not spread over the load: start at %v s", r.Repeat.StartS)
		}
		syncs, status, texts = append(syncs, r), append(status, s.Hosts[0].GateStatus()), append(texts, text)
	}
	for _, key := range []string{"itl_p95_ms", "tpot_p50_ms", "output_tok_s"} {
		a, b := syncs[0].AcrossRuns(key), syncs[1].AcrossRuns(key)
		if a == nil || b == nil {
			t.Errorf("%s: no interval (%v, %v)", key, a, b)
			continue
		}
		if a.Hi < b.Lo || b.Hi < a.Lo {
			t.Errorf("%s: two runs of one GPU, intervals [%g, %g] and [%g, %g] do not overlap (blocks %+v and %+v)",
				key, a.Lo, a.Hi, b.Lo, b.Hi, syncs[0].Repeat.Figure(key), syncs[1].Repeat.Figure(key))
		}
		if w := syncs[0].CI.Get(key); w != nil && (w.Lo < a.Lo || w.Hi > a.Hi) {
			t.Errorf("%s: the interval across runs [%g, %g] is narrower than the one over requests [%g, %g]", key, a.Lo, a.Hi, w.Lo, w.Hi)
		}
	}
	// Never flagged or failed for its engine's drift. (Whether each run decides at all depends on
	// the machine: on a busy 2-core one a rung can be client-limited, an inconclusive run.)
	if bad := func(st results.Status) bool { return st == results.StatusFlag || st == results.StatusFailed }; bad(status[0]) || bad(status[1]) {
		t.Errorf("the same GPU twice: %s, then %s\n%s\n%s", status[0], status[1], texts[0], texts[1])
	}
}

package load

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
)

// longReq is a request of 10 tokens from sent to end, one token a second after its first at first.
func longReq(sent, first, end time.Duration, ramp bool) *Record {
	r := &Record{sent: sent, sched: sent, end: end, OutputTokens: 10, ramp: ramp, Warmup: ramp}
	step := (end - first) / 9
	for i := range 10 {
		r.marks = append(r.marks, mark{at: first + time.Duration(i)*step, tok: 1})
	}
	return r
}

// Issue 55: a steady rung whose requests take longer than its window (a slow engine at a constant
// rate) reports its latencies from the requests that completed in the window, sent during its ramp,
// and says so; with none completed either, it says why there are none. A closed-loop rung does not.
func TestSteadyRungLatencyFromCompletedRequests(t *testing.T) {
	spec := rungSpec{Kind: kindConstant, Rate: 1, Steady: true}
	o := &rungOut{spec: spec, winStart: 30 * time.Second, winEnd: 50 * time.Second, level: &levelOut{}}
	for i := range 5 { // sent in the ramp, 40 s each, completing in the window
		s := time.Duration(i) * time.Second
		o.recs = append(o.recs, longReq(s, s+2*time.Second, s+40*time.Second, true))
	}
	for i := range 5 { // sent in the window, cut by the drain
		r := longReq(35*time.Second+time.Duration(i)*time.Second, 0, 0, false)
		r.marks, r.Incomplete = nil, true
		o.recs = append(o.recs, r)
	}
	run := summarize(o, &analysis.SLO{}, 1)
	if run.TTFT.Count != 5 || run.E2E.Count != 5 || !(run.E2E.P50 > 39000) || !strings.Contains(run.LatencyFrom, "the 5 requests that completed in the 20 s window") {
		t.Fatalf("TTFT n=%d E2E n=%d p50 %.0f ms; latency from %q", run.TTFT.Count, run.E2E.Count, run.E2E.P50, run.LatencyFrom)
	}
	o.recs = o.recs[5:]
	run = summarize(o, &analysis.SLO{}, 1)
	if run.TTFT.Count != 0 || !strings.HasPrefix(run.LatencyFrom, "none: no request completed") {
		t.Fatalf("no request completed: TTFT n=%d, latency from %q", run.TTFT.Count, run.LatencyFrom)
	}
	// A closed-loop rung (a throughput probe, aicr's concurrency run, whose TTFT p99 can be gated)
	// never reads its ramp's burst as its level.
	closed := &rungOut{spec: rungSpec{Kind: kindThroughput, Concurrency: 8, Steady: true}, winStart: o.winStart, winEnd: o.winEnd, level: &levelOut{}}
	for i := range 5 {
		s := time.Duration(i) * time.Second
		closed.recs = append(closed.recs, longReq(s, s+2*time.Second, s+40*time.Second, true))
	}
	if run = summarize(closed, &analysis.SLO{}, 1); run.TTFT.Count != 0 || run.LatencyFrom != "" {
		t.Fatalf("closed loop: TTFT n=%d, latency from %q", run.TTFT.Count, run.LatencyFrom)
	}
	// A rung whose window's own requests completed keeps them, and says nothing.
	o.recs = []*Record{longReq(31*time.Second, 32*time.Second, 40*time.Second, false)}
	if run = summarize(o, &analysis.SLO{}, 1); run.TTFT.Count != 1 || run.LatencyFrom != "" {
		t.Fatalf("a measured request: TTFT n=%d, latency from %q", run.TTFT.Count, run.LatencyFrom)
	}
}

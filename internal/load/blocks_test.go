package load

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 51: a synchronous rung stopped by Ctrl-C in its second block said it was "cut by
// load.max_rung_duration" and told the user to raise it. The pooled rung's cut is what ended a
// block: the interruption, the errors, else the cap.
func TestPooledSizingSaysWhatCutIt(t *testing.T) {
	block := func(ended string, done int) syncBlock {
		return syncBlock{run: results.Run{EndedBy: ended, Sizing: &results.RungSizing{Completed: done}}}
	}
	for _, tc := range []struct {
		ended, want string
	}{
		{EndedByInterrupted, "interrupted in its 2 blocks with 20 of 30"},
		{EndedByErrors, "stopped by its errors in 2 blocks"},
		{EndedByDuration, "cut by load.max_rung_duration in 2 blocks"},
	} {
		z := pooledSizing([]syncBlock{block(EndedByRequests, 10), block(tc.ended, 10)}, 30)
		if !z.Cut || !strings.HasPrefix(z.Reason, tc.want) {
			t.Errorf("%s: cut %v %q, want %q", tc.ended, z.Cut, z.Reason, tc.want)
		}
	}
	if z := pooledSizing([]syncBlock{block(EndedByRequests, 15), block(EndedByInterrupted, 15)}, 30); z.Cut || !strings.HasPrefix(z.Reason, "ran in 2 blocks") {
		t.Errorf("enough despite the stop: %+v", z)
	}
}

// The client set the pace only when a pattern of requests fell behind: 1 % of them and at least
// three. One 11 ms blip among 96 requests of a probe (its p99 read off the top two) made the
// README's first run on a quiet machine undecided.
func TestSelfCheckCountsLateRequests(t *testing.T) {
	lags := func(n, late int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = 0.05
			if i < late {
				out[i] = 11
			}
		}
		return out
	}
	for _, tc := range []struct {
		n, late int
		want    bool
	}{{96, 1, false}, {96, 2, false}, {96, 3, true}, {1000, 9, false}, {1000, 10, true}, {40, 40, false}} {
		if got, why := selfCheck(lags(tc.n, tc.late), 0, 0); got != tc.want {
			t.Errorf("%d late of %d: client-limited %v (%s), want %v", tc.late, tc.n, got, why, tc.want)
		}
	}
}

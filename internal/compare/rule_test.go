package compare

import (
	"strings"
	"testing"
)

// The one rule behind gates and comparisons: a figure decides only when it can.
func TestGate(t *testing.T) {
	tests := []struct {
		name   string
		f      Figure
		limit  float64
		upper  bool
		want   string
		reason string
	}{
		{"within passes", Figure{Value: 10, Samples: 100}, 200, true, Pass, ""},
		{"beyond fails", Figure{Value: 300, Samples: 100}, 200, true, Fail, ""},
		{"too few samples: not a pass", Figure{Value: 10, Samples: 5}, 200, true, Inconclusive, "n=5 of the 30 needed: 25 more requests"},
		// Issue 42: what would decide it, in requests and, with the rung's window, in seconds.
		{"too few samples, the window known", Figure{Value: 10, Samples: 22, Window: 22.5}, 200, true, Inconclusive, "n=22 of the 30 needed: 8 more requests, or load.max_duration ≥ 31 s"},
		{"too few samples: not a fail", Figure{Value: 300, Samples: 5}, 200, true, Inconclusive, "load.max_duration"},
		{"no sample count (GEMM): decides", Figure{Value: 300}, 200, true, Fail, ""},
		{"client-limited breach: inconclusive", Figure{Value: 300, Samples: 100, ClientLimited: true}, 200, true, Inconclusive, "client-limited"},
		{"client-limited pass: a pass", Figure{Value: 100, Samples: 100, ClientLimited: true}, 200, true, Pass, ""},
		{"lower-bound floor breach: inconclusive", Figure{Value: 5, Samples: 100, LowerBound: true}, 10, false, Inconclusive, "lower bound"},
		{"lower-bound latency breach: inconclusive", Figure{Value: 300, Samples: 100, LowerBound: true}, 200, true, Inconclusive, "truncated"},
		{"lower-bound above the floor: a pass", Figure{Value: 50, Samples: 100, LowerBound: true}, 10, false, Pass, ""},
		{"the aicr case: CI spans the floor", Figure{Value: 9661, Samples: 1000, CI: ci(6809, 12623)}, 11250, false, Inconclusive, "spans the limit"},
		{"CI spans, value within: inconclusive", Figure{Value: 12000, Samples: 1000, CI: ci(10000, 14000)}, 11250, false, Inconclusive, "spans"},
		{"CI wholly beyond: fail", Figure{Value: 9661, Samples: 1000, CI: ci(9000, 10000)}, 11250, false, Fail, ""},
		// A starved engine's breach is the host's when the wait alone covers it, either way a gate bounds.
		{"a latency breach the engine's CPU wait covers: inconclusive", waited(Figure{Value: 60, Samples: 100}, 25), 50, true, Inconclusive, "without that wait it would be within the limit (45.0)"},
		{"a latency breach beyond what the wait covers: fail", waited(Figure{Value: 80, Samples: 100}, 25), 50, true, Fail, ""},
		{"a floor breach the wait covers: inconclusive", waited(Figure{Value: 9, Samples: 100}, 20), 10, false, Inconclusive, "give the engine CPUs of its own"},
		{"no wait read: fail", Figure{Value: 60, Samples: 100}, 50, true, Fail, ""},
		{"a p95 breach whose engine waited 8 % of its rung: inconclusive", waited(tail(Figure{Value: 80, Samples: 100}), 8), 50, true, Inconclusive, "so that tail may be those waits alone: give the engine CPUs"},
		{"a p99 breach at a 3 % wait: inconclusive", waited(Figure{Value: 80, Samples: 400, Tail: 0.01}, 3), 50, true, Inconclusive, "beyond its p99"},
		{"a p95 breach at a 3 % wait: fail", waited(tail(Figure{Value: 80, Samples: 100}), 3), 50, true, Fail, ""},
	}
	for _, tc := range tests {
		got, why := Gate(tc.f, tc.limit, tc.upper, 30)
		if got != tc.want || !strings.Contains(why, tc.reason) {
			t.Errorf("%s: %s (%q), want %s with %q", tc.name, got, why, tc.want, tc.reason)
		}
	}
}

// A GPU-to-GPU comparison never flags from a figure that cannot show it, and counts the requests
// behind the figure compared (an ITL p95 of a 5-request rung is 5 samples).
func TestGPUsGuardsAreTheGateGuards(t *testing.T) {
	g := LLMGuards()
	cells := func(bad Figure) []Cell {
		good := Figure{Value: 6.5, Samples: 100, CI: ci(6.4, 6.6)}
		return []Cell{{GPU: 0, Figure: good}, {GPU: 1, Figure: bad}, {GPU: 2, Figure: good}}
	}
	for _, tc := range []struct {
		name   string
		bad    Figure
		flag   bool
		reason string
	}{
		{"the issue's false flag: ITL p95 from a 5-request rung", Figure{Value: 8.01, Samples: 5, CI: ci(7.9, 8.1)}, false, "n=5 of the 30 needed: 25 more requests"},
		{"client-limited", Figure{Value: 9, Samples: 100, ClientLimited: true, CI: ci(8.9, 9.1)}, false, "client-limited"},
		{"a real outlier", Figure{Value: 9, Samples: 100, CI: ci(8.9, 9.1)}, true, "beyond the 10 % margin with its interval"},
	} {
		c := Peers("itl_p95_ms", cells(tc.bad), false, g)
		v := c.Values[1]
		if v.Flagged != tc.flag || v.Inconclusive == tc.flag || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: flagged %v inconclusive %v (%s)", tc.name, v.Flagged, v.Inconclusive, v.Reason)
		}
	}
}

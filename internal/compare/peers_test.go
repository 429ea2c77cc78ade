package compare

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// waited is f with its engine's CPU wait (%).
func waited(f Figure, pct float64) Figure {
	f.CPUWait = &pct
	return f
}

// tail is f as a p95.
func tail(f Figure) Figure {
	f.Tail = 0.05
	return f
}

// hostPressure is f with its host's CPU pressure (%) in place of its engine's wait.
func hostPressure(f Figure, pct float64) Figure {
	f = waited(f, pct)
	f.HostPressure = true
	return f
}

// around is a figure with a 95 % interval of ±rel around it, from n requests.
func around(v, rel float64, n int) Figure {
	return Figure{Value: v, Samples: n, CI: ci(v*(1-rel), v*(1+rel))}
}

// Issue 35's rule: worse than the median of its peers by more than the margin AND the interval of
// the gap beyond the margin.
func TestPeers(t *testing.T) {
	g := LLMGuards() // 10 % margin
	tests := []struct {
		name    string
		metric  string
		cells   []Cell
		higher  bool
		flagged []int
		incon   []int
		reason  string // in the reason of cell 2
	}{
		{"a card 11 % slower with tight intervals is flagged", "tpot_p50_ms",
			cellsOf(around(6.6, 0.003, 30), around(6.6, 0.003, 30), around(6.6*1.111, 0.003, 30), around(6.61, 0.003, 30)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"the same card with ±3 % intervals cannot decide", "tpot_p50_ms",
			cellsOf(around(6.6, 0.03, 30), around(6.6, 0.03, 30), around(6.6*1.111, 0.03, 30), around(6.61, 0.03, 30)), false,
			nil, []int{2}, "reaches within the 10 % margin"},
		{"9 % slower passes, however tight", "output_tok_s_peak",
			cellsOf(around(4000, 0.001, 90), around(4000, 0.001, 90), around(3640, 0.001, 90)), true,
			nil, nil, "within 10 % of the median of the other GPUs (9.0 % below)"},
		{"judged against the median, not the best: one fast card does not flag the rest", "output_tok_s_peak",
			cellsOf(around(4000, 0.005, 90), around(4000, 0.005, 90), around(4000, 0.005, 90), around(4800, 0.005, 90)), true,
			nil, nil, "within 10 %"},
		{"no interval: cannot be told from noise", "itl_p95_ms",
			cellsOf(Figure{Value: 6.5, Samples: 100}, Figure{Value: 6.5, Samples: 100}, Figure{Value: 9, Samples: 100}), false,
			nil, []int{2}, "no confidence interval"},
		{"client-limited stays inconclusive", "itl_p95_ms",
			cellsOf(around(6.5, 0.001, 100), around(6.5, 0.001, 100), Figure{Value: 9, Samples: 100, ClientLimited: true, CI: ci(8.99, 9.01)}), false,
			nil, []int{2}, "client-limited"},
		// Issue 53's CI case: GPUs vetted one after the other, the host's CPUs busy while one was.
		{"a card 15 % slower whose engine waited for a CPU 30 % of its rung, the others 2 %, is the host's", "tpot_p50_ms",
			cellsOf(waited(around(6.6, 0.003, 30), 2), waited(around(6.6, 0.003, 30), 2), waited(around(6.6*1.15, 0.003, 30), 30), waited(around(6.61, 0.003, 30), 2)), false,
			nil, []int{2}, "waited for a CPU 30 % of the time they were runnable in this rung (the reference's 2 %), which alone can make it up to 40 % slower, leaving 0.0 % of the"},
		{"the same card and waits where its engine waited no longer than the others' is flagged", "tpot_p50_ms",
			cellsOf(waited(around(6.6, 0.003, 30), 30), waited(around(6.6, 0.003, 30), 30), waited(around(6.6*1.15, 0.003, 30), 30), waited(around(6.61, 0.003, 30), 30)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"a 40 % gap of which a 5-point longer wait explains 6 % is still the GPU's", "tpot_p50_ms",
			cellsOf(waited(around(6.6, 0.003, 30), 10), waited(around(6.6, 0.003, 30), 10), waited(around(6.6*1.4, 0.003, 30), 15), waited(around(6.61, 0.003, 30), 10)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"a card whose engine's wait was read, against peers whose was not (a reference measured elsewhere), is judged as before", "tpot_p50_ms",
			cellsOf(around(6.6, 0.003, 30), around(6.6, 0.003, 30), waited(around(6.6*1.15, 0.003, 30), 30), around(6.61, 0.003, 30)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"a gap within the margin whose interval reaches past it, covered by the engine's longer wait, is the host's to answer for", "itl_p95_ms",
			cellsOf(waited(around(8.25, 0.03, 36), 85), waited(around(8.25, 0.03, 36), 85), waited(around(8.77, 0.03, 36), 91), waited(around(8.25, 0.03, 36), 85)), false,
			nil, []int{2}, "waited for a CPU 91 % of the time they were runnable in this rung (the reference's 85 %)"},
		// ci26's case: a healthy GPU's ITL p95 213 % above its sibling's, loaded one after the other on a
		// busy node. A tail is its slowest 5 %: a wait of that share may be the whole tail.
		{"a p95 three times its peers' whose engine waited 30 % of its rung, as they did, is the host's", "itl_p95_ms",
			cellsOf(waited(tail(around(8.9, 0.05, 30)), 30), waited(tail(around(8.9, 0.05, 30)), 30), waited(tail(around(28, 0.05, 30)), 30)), false,
			nil, []int{2}, "no less than the 5 % of samples beyond its p95, so that tail may be those waits alone, whatever the"},
		{"the same tail whose engines waited 3 % is flagged", "itl_p95_ms",
			cellsOf(waited(tail(around(8.9, 0.05, 30)), 3), waited(tail(around(8.9, 0.05, 30)), 3), waited(tail(around(28, 0.05, 30)), 3)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"the same tail with its peers' wait unknown (a reference measured elsewhere) is judged as before", "itl_p95_ms",
			cellsOf(tail(around(8.9, 0.05, 30)), tail(around(8.9, 0.05, 30)), waited(tail(around(28, 0.05, 30)), 30)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"a median three times its peers' at the same 30 % wait is still the GPU's", "tpot_p50_ms",
			cellsOf(waited(around(8.9, 0.05, 30), 30), waited(around(8.9, 0.05, 30), 30), waited(around(28, 0.05, 30), 30)), false,
			[]int{2}, nil, "beyond the 10 % margin with its interval"},
		{"an engine in a pod: its host's pressure, said as such", "itl_p95_ms",
			cellsOf(hostPressure(tail(around(8.9, 0.05, 30)), 60), hostPressure(tail(around(8.9, 0.05, 30)), 60), hostPressure(tail(around(28, 0.05, 30)), 70)), false,
			nil, []int{2}, "some task on the engine's host waited for a CPU 70 % of this rung (the host's CPU pressure"},
		{"the TTFT ms floor still holds", "ttft_p95_ms",
			cellsOf(around(15, 0.001, 100), around(15, 0.001, 100), around(18, 0.001, 100)), false,
			nil, nil, "not material"},
	}
	for _, tc := range tests {
		c := Peers(tc.metric, tc.cells, tc.higher, g)
		for _, v := range c.Values {
			if got, want := v.Flagged, contains(tc.flagged, v.GPU); got != want {
				t.Errorf("%s: gpu %d flagged %v, want %v (%s)", tc.name, v.GPU, got, want, v.Reason)
			}
			if got, want := v.Inconclusive, contains(tc.incon, v.GPU); got != want {
				t.Errorf("%s: gpu %d inconclusive %v, want %v (%s)", tc.name, v.GPU, got, want, v.Reason)
			}
		}
		if !strings.Contains(c.Values[2].Reason, tc.reason) {
			t.Errorf("%s: reason %q lacks %q", tc.name, c.Values[2].Reason, tc.reason)
		}
		if c.Against != AgainstPeers {
			t.Errorf("%s: against %q", tc.name, c.Against)
		}
	}
}

func cellsOf(figs ...Figure) []Cell {
	out := make([]Cell, len(figs))
	for i, f := range figs {
		out[i] = Cell{GPU: i, Figure: f}
	}
	return out
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// Identical cards are never flagged: 2000 draws of 4 cards whose figures scatter by their own
// (honest) intervals, with a 10 % margin: no flag; none inconclusive at ±0.5 %, and at ±3 % only
// the rare card whose gap's interval reaches past the margin (issue 42: such a gap is undecided,
// not ok), under 0.5 % of them.
func TestPeersIdenticalCardsNeverFlag(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := LLMGuards()
	for _, rel := range []float64{0.005, 0.03} {
		se := rel / 1.96
		cards, undecided := 0, 0
		for range 2000 {
			var figs []Figure
			for range 4 {
				v := 100 * math.Exp(rng.NormFloat64()*se)
				figs = append(figs, around(v, rel, 100))
			}
			for _, higher := range []bool{true, false} {
				c := Peers("output_tok_s_peak", cellsOf(figs...), higher, g)
				for _, v := range c.Values {
					cards++
					if v.Flagged {
						t.Fatalf("±%g %%: identical cards: %s", rel*100, v.Reason)
					}
					if v.Inconclusive {
						undecided++
						if !strings.Contains(v.Reason, "reaches past the 10 % margin") || !strings.Contains(v.Reason, "more requests each") {
							t.Fatalf("±%g %%: %s", rel*100, v.Reason)
						}
					}
				}
			}
		}
		if limit := map[float64]int{0.005: 0, 0.03: cards / 200}[rel]; undecided > limit {
			t.Errorf("±%g %%: %d of %d identical cards inconclusive, want at most %d", rel*100, undecided, cards, limit)
		}
	}
}

// Issue 42: a gap within the margin whose interval spans it, or that client-limited figures fed on
// both sides, is inconclusive, never a pass, and says what would decide it.
func TestPeersWithinMarginUndecided(t *testing.T) {
	g := LLMGuards()
	// The case: every GPU client-limited, the gap's interval [−19.9 %, +16.9 %].
	wide := cellsOf(around(3950, 0.13, 30), around(3950, 0.13, 30), around(3900, 0.13, 30), around(3960, 0.13, 30))
	for i := range wide {
		wide[i].ClientLimited = true
	}
	c := Peers("output_tok_s_peak", wide, true, g)
	for _, v := range c.Values {
		if !v.Inconclusive || v.Flagged || !strings.Contains(v.Reason, "client-limited") {
			t.Errorf("all client-limited: gpu %d: %s", v.GPU, v.Reason)
		}
	}
	for i := range wide {
		wide[i].ClientLimited = false
	}
	c = Peers("output_tok_s_peak", wide, true, g)
	for _, v := range c.Values {
		if !v.Inconclusive || !strings.Contains(v.Reason, "reaches past the 10 % margin") || !strings.Contains(v.Reason, "n=30 per GPU; about") {
			t.Errorf("wide interval: gpu %d: %s", v.GPU, v.Reason)
		}
	}
}

// The detectable slowdown is what the rule then catches: a card that much slower is flagged in
// about 80 % of runs (Power), one at the margin almost never.
func TestPeersDetectableSlowdown(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := LLMGuards()
	rel := 0.02
	se := rel / 1.96
	draw := func(slow float64) []Cell {
		var figs []Figure
		for i := range 4 {
			v := 100 * math.Exp(rng.NormFloat64()*se)
			if i == 2 {
				v *= 1 + slow/100
			}
			figs = append(figs, around(v, rel, 100))
		}
		return cellsOf(figs...)
	}
	d := Peers("tpot_p50_ms", draw(0), false, g).DetectablePct
	if !(d > 10 && d < 20) {
		t.Fatalf("detectable slowdown %.1f %% at ±2 %% intervals and a 10 %% margin, want a little above 10", d)
	}
	caught := func(slow float64) float64 {
		n := 0
		for range 2000 {
			if Peers("tpot_p50_ms", draw(slow), false, g).Values[2].Flagged {
				n++
			}
		}
		return float64(n) / 2000
	}
	if p := caught(d); p < 0.7 || p > 0.97 {
		t.Errorf("a card %.1f %% slower (the detectable slowdown) caught in %.0f %% of runs, want about %.0f %%", d, 100*p, 100*Power)
	}
	if p := caught(10); p > 0.05 {
		t.Errorf("a card at the margin caught in %.0f %% of runs", 100*p)
	}
}

// A gap past the margin whose interval includes no slowdown at all is noise: a pass that says so,
// not an undecided comparison (the hog test's run 3: TPOT p95 +21 %, interval [-32 %, 81 %]).
func TestPeersNoiseIsAPass(t *testing.T) {
	c := Peers("tpot_p95_ms", cellsOf(around(10, 0.3, 30), around(10, 0.3, 30), around(12.1, 0.3, 30)), false, LLMGuards())
	v := c.Values[2]
	if v.Flagged || v.Inconclusive || !strings.Contains(v.Reason, "inside the noise") {
		t.Errorf("noise: %+v", v)
	}
	// A real slowdown (interval clear of zero) that the interval cannot put past the margin stays undecided.
	c = Peers("tpot_p95_ms", cellsOf(around(10, 0.02, 30), around(10, 0.02, 30), around(11.2, 0.02, 30)), false, LLMGuards())
	if v := c.Values[2]; !v.Inconclusive {
		t.Errorf("a real 12 %% slowdown with ±2 %% intervals: %+v", v)
	}
}

// A figure's run-to-run spread: fewer than three runs say nothing; three alike runs spread 0; the
// prediction half-width of 100, 110, 90 is t(2) × 10 % × √(4/3) = 49.7 %.
func TestRunToRun(t *testing.T) {
	if _, ok := RunToRun([]float64{100, 110}); ok {
		t.Error("two runs gave a spread")
	}
	if _, ok := RunToRun([]float64{100, 0, 90}); ok {
		t.Error("a run that measured nothing gave a spread")
	}
	if s, ok := RunToRun([]float64{50, 50, 50}); !ok || s.NextPct() != 0 || s.GapPct() != 0 {
		t.Errorf("three alike runs: %+v %v", s, ok)
	}
	s, ok := RunToRun([]float64{100, 110, 90})
	if !ok || math.Abs(s.SDPct-10) > 1e-9 || math.Abs(s.NextPct()-4.303*10*math.Sqrt(4.0/3)) > 1e-6 || math.Abs(s.GapPct()-43.03*math.Sqrt2) > 1e-6 {
		t.Errorf("100, 110, 90: %+v next %.2f gap %.2f", s, s.NextPct(), s.GapPct())
	}
}

// A throughput's CPU wait is taken off the way Gate takes it off: the unstarved figure is x × c, so a
// card 30 % below its peers whose engine waited 1/6 of its rung longer (c = 1.2) would still be 16 %
// below without that wait: the GPU's, not the host's. (The latency formula, (1 + gap)/c − 1, read
// it as 8 % and left the card inconclusive.)
func TestCPUWaitOnThroughput(t *testing.T) {
	g := LLMGuards() // 10 % margin
	slow := func(v float64) []Cell {
		return cellsOf(waited(around(4000, 0.002, 90), 0), waited(around(4000, 0.002, 90), 0), waited(around(v, 0.002, 90), 100.0/6))
	}
	c := Peers("output_tok_s_peak", slow(2800), true, g)
	if v := c.Values[2]; !v.Flagged {
		t.Errorf("30 %% below with a wait that explains 1.2×: flagged %v, inconclusive %v, want flagged (%s)", v.Flagged, v.Inconclusive, v.Reason)
	}
	c = Peers("output_tok_s_peak", slow(3400), true, g)
	if v := c.Values[2]; v.Flagged || !v.Inconclusive || !strings.Contains(v.Reason, "leaving 0.0 % of the") {
		t.Errorf("15 %% below with a wait that explains 1.2×: flagged %v, inconclusive %v, want the host's (%s)", v.Flagged, v.Inconclusive, v.Reason)
	}
	res, _, why := Pair("output_tok_s", waited(around(2800, 0.002, 90), 100.0/6), waited(around(4000, 0.002, 90), 0), true, 10, g)
	if res != Fail {
		t.Errorf("Pair: 30 %% below with a wait that explains 1.2×: %s (%s), want fail", res, why)
	}
}

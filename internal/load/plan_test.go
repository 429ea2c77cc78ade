package load

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// planner is an executor of the default profile whose load has run for elapsed, with a
// synchronous rung and a steady probe measured: nothing is sent, only planned.
func planner(elapsed, alone time.Duration, syncRate float64, probe results.Run) *executor {
	cfg := Defaults(results.LoadConfig{})
	ex := &executor{cfg: cfg, o: withOptionDefaults(Options{}, cfg), rn: &runner{c: &client{epoch: time.Now().Add(-elapsed)}}}
	ex.tempo, ex.syncRate, ex.lastProbeTime = tempo{alone: alone}, syncRate, 0
	ex.lastProbeTime = ex.reqTime(probe)
	return ex
}

// steadyProbe is a probe at conc that sustained tokS with full-length requests.
func steadyProbe(conc int, tokS float64) results.Run {
	return results.Run{Kind: kindThroughput, Concurrency: conc, OutputTokS: tokS, MeanOutputTokens: 256,
		Requests: results.RequestCounts{Successful: 20}, Steady: &results.RungSteady{Reason: "levelled"}}
}

// The H200 run of docs/run-h200-verify41.md (transformers, a random Qwen3-8B, the default profile):
// the synchronous rung sustained 0.094 req/s (a 256-token request alone ~10.6 s) and ended 41 s into
// the load, the probe at c=128 543 tok/s (60 s a request) 110 s in. There the old plan probed
// c=256 (144 s) and ran ten constant rates of 54–107 s: about 16 minutes of load. The plan now
// skips the probe (it and the least ladder after it would pass load.time_budget), and holds as many
// constant rates as fit in what is left (at least five), so that the whole load's plan is within
// the budget.
func TestSlowEnginePlanFitsTheBudget(t *testing.T) {
	probe := steadyProbe(128, 543)
	ex := planner(110*time.Second, 10600*time.Millisecond, 0.094, probe)
	budget := time.Duration(ex.cfg.TimeBudget)
	if _, why := ex.probeFits(probe, 256, 2*ex.lastProbeTime); !strings.Contains(why, "load.time_budget") {
		t.Errorf("probe at c=256 (%v a request) fits: %q; want it skipped for the budget", 2*ex.lastProbeTime, why)
	}
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	total := 110*time.Second + planned(specs)
	for _, s := range specs {
		t.Logf("constant %.3g req/s: planned %v (least %v, tail %v), a request %v", s.Rate, s.Expect.Round(time.Second), s.Duration.Round(time.Second), s.Drain, ex.tempo.perReq(s.Rate).Round(time.Second))
	}
	t.Logf("%d rates, load planned %v of %v: %s", len(specs), total.Round(time.Second), budget, note)
	if len(specs) < minRates || len(specs) >= ex.cfg.Rates {
		t.Errorf("%d rates: want fewer than load.rates' %d, at least %d", len(specs), ex.cfg.Rates, minRates)
	}
	if total > budget {
		t.Errorf("the load is planned for %v: past load.time_budget %v", total, budget)
	}
	if !strings.Contains(note, "load.time_budget") || !strings.Contains(note, "of load.rates' 10") {
		t.Errorf("note %q: want how many rates and why", note)
	}
	// Each constant rung is planned long enough to level: its ramp (a request's time at its rate,
	// or the probe's concurrency reached past capacity) and half that again, as the plateau test
	// asks, and 10 completions.
	for _, s := range specs {
		on := ex.tempo.onset(s.Rate)
		if need := on + max(on/2, time.Duration(10/s.Rate*float64(time.Second))); s.Expect < need || s.Expect > need+20*time.Second {
			t.Errorf("%.3g req/s: planned %v, its level needs %v", s.Rate, s.Expect, need)
		}
	}
	// The rates are spread over the same range as the ten would be: the top still past the probe.
	if top := specs[len(specs)-1].Rate; top < hi*0.999 || specs[0].Rate <= lo {
		t.Errorf("rates %.3g..%.3g: want over (%.3g, %.3g]", specs[0].Rate, top, lo, hi)
	}
}

// A fast engine (vLLM-like on the simulated H200: 1.9 s a request alone, 20,000 tok/s at c=128)
// keeps the whole default plan: every rate, and probes up the knee. Old plan and new are one.
func TestFastEnginePlanKeepsEveryRate(t *testing.T) {
	probe := steadyProbe(128, 20000)
	ex := planner(45*time.Second, 1900*time.Millisecond, 0.5, probe)
	if _, why := ex.probeFits(probe, 256, 2*ex.lastProbeTime); why != "" {
		t.Errorf("probe at c=256 skipped: %s", why)
	}
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	if len(specs) != ex.cfg.Rates || note != "" {
		t.Errorf("%d rates (%q): want all %d", len(specs), note, ex.cfg.Rates)
	}
	for _, s := range specs {
		if d := time.Duration(ex.cfg.MaxDuration); s.Duration != d || s.Expect > d+5*time.Second {
			t.Errorf("%.3g req/s: least %v, planned %v: want max_duration's %v and its tail", s.Rate, s.Duration, s.Expect, d)
		}
	}
}

// A budget no ladder fits still runs the fewest rates that show a plateau, and says it runs over.
func TestPlanPastTheBudgetKeepsTheLeastLadder(t *testing.T) {
	probe := steadyProbe(128, 543)
	ex := planner(7*time.Minute, 10600*time.Millisecond, 0.094, probe)
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	if len(specs) != minRates || !strings.Contains(note, "runs over") {
		t.Errorf("%d rates (%q): want %d, and that it runs over", len(specs), note, minRates)
	}
}

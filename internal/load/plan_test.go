package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
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

// A budget no ladder fits still runs the fewest rates the budget leaves (three), and says it runs
// over and what fewer than five give up.
func TestPlanPastTheBudgetKeepsTheLeastLadder(t *testing.T) {
	probe := steadyProbe(128, 543)
	ex := planner(7*time.Minute, 10600*time.Millisecond, 0.094, probe)
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	if len(specs) != budgetRates || !strings.Contains(note, "runs over") || !strings.Contains(note, "fewer than the 5 rates") {
		t.Errorf("%d rates (%q): want %d, that it runs over and what it gives up", len(specs), note, budgetRates)
	}
}

// The simulator playing the H200's slow engine of docs/run-h200-verify41.md (transformers on an 8B:
// 40 ms a step + 1.5 ms a sequence in it, so ~40 ms a token alone and ~230 ms at 128, as measured
// there), with the default profile's shape (512-token prompts, c=128, 10 rates) compressed eightfold
// in time: 32 output tokens, 2.5 s rungs, a 22.5 s cap, 4 samples for the synchronous rung and an
// 80 s budget (the fixed parts, a 2 s tail, 12 plateau slices, do not compress: the budget is a
// little more than 8 m / 8). As on the H200, the knee search stops at c=128 for the budget (c=256
// would need twice its 60 s a request, scaled), the ladder holds fewer rates (at least five) and
// the run's notes say why; every rung is steady or transient by the rule; and the time left
// reported as each constant rung starts is within 30 % of the time the load really had left (the
// old estimate, RungTime a rung, was off by half on this engine).
func TestH200SlowEngineCompressed(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute against the simulator's slow engine")
	}
	t.Parallel() // waits on a slow engine: its wall time, not the CPU's
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: testModel,
		Engine: sim.EngineConfig{StepOverhead: 40 * time.Millisecond, SeqOverhead: 1500 * time.Microsecond}}, "127.0.0.1:0")
	if err != nil {
		t.Skipf("sim: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	o := opts(srv.URL(), results.LoadConfig{Profile: "sweep", MaxConcurrency: 128, Rates: 10, PromptTokens: 512, OutputTokens: 32,
		MaxDuration: results.Duration(2500 * time.Millisecond), MaxRungDuration: results.Duration(22500 * time.Millisecond),
		MinSamples: 4, TimeBudget: results.Duration(80 * time.Second)})
	type mark struct {
		at    time.Time
		label string
		after int
		left  time.Duration
	}
	var marks []mark
	var after int
	var left time.Duration
	o.OnPlan = func(n int, d time.Duration) { after, left = n, d }
	o.OnRung = func(_ int, label string) { marks = append(marks, mark{time.Now(), label, after, left}) }
	start := time.Now()
	l, err := Run(context.Background(), o)
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	steadyRungs(t, l)
	k := l.Saturation.Knee
	t.Logf("load %v of a %v budget; knee %q; plan %q", end.Sub(start).Round(time.Second), time.Duration(o.Config.TimeBudget), k.Reason, k.Plan)
	if len(k.Probes) != 1 || k.Concurrency != 128 || !strings.Contains(k.Reason, "load.time_budget") {
		t.Errorf("knee %+v: want the search stopped at c=128 for the budget", k)
	}
	constants := 0
	for _, r := range l.Runs {
		if r.Kind == kindConstant {
			constants++
		}
	}
	if k.PlannedRates < minRates || k.PlannedRates >= 10 || constants != k.PlannedRates+k.ClimbedRungs {
		t.Errorf("%d rates planned, %d run (%d climbed): want fewer than 10, at least %d", k.PlannedRates, constants, k.ClimbedRungs, minRates)
	}
	if !strings.Contains(k.Plan, "load.time_budget") || !strings.Contains(strings.Join(l.RungNotes(), "\n"), "sweep plan: ") {
		t.Errorf("plan %q, notes %q: want why, in the run's notes", k.Plan, l.RungNotes())
	}
	old := RungTime(o.Config)
	for i, m := range marks {
		real := end.Sub(m.at)
		t.Logf("rung %d (%s): %v left planned (%d rungs after it), %v really; the old estimate %v", i+1, m.label, m.left.Round(100*time.Millisecond),
			m.after, real.Round(100*time.Millisecond), time.Duration(len(marks)-i)*old)
		if !strings.HasPrefix(m.label, kindConstant) {
			continue
		}
		if r := m.left.Seconds() / real.Seconds(); r < 0.7 || r > 1.3 {
			t.Errorf("rung %d (%s): %v left planned, %v really (×%.2f): want within 30 %%", i+1, m.label, m.left, real, r)
		}
		if m.after != len(marks)-1-i {
			t.Errorf("rung %d: %d rungs planned after it, %d ran", i+1, m.after, len(marks)-1-i)
		}
	}
}

// On a busy client a fast engine's rungs run on past their plan to narrow their rate (up to twice
// it): on the simulator's default profile beside other work, rungs planned for ~22 s took 22–80 s,
// and a time left by the plan alone said 3m54s where 6m08s were left. The time left is scaled by
// how the rungs planned from a measured pace compared with their plan (at most twice, at least
// half); a guessed rung (planned before any probe) does not count, and the plan itself is not
// scaled.
func TestTimeLeftFollowsTheDrift(t *testing.T) {
	ex := planner(time.Minute, 2*time.Second, 1, steadyProbe(128, 20000))
	var left time.Duration
	ex.o.OnPlan = func(_ int, d time.Duration) { left = d }
	rung := rungSpec{Expect: 20 * time.Second}
	ahead := []rungSpec{{Expect: 20 * time.Second}, {Expect: 20 * time.Second}}
	ex.record(rungSpec{Expect: 20 * time.Second}, 80*time.Second) // guessed: not counted
	ex.plan(rung, ahead)
	if left != time.Minute {
		t.Errorf("before any known rung: %v left, want the plan's 1m0s", left)
	}
	ex.record(rungSpec{Expect: 20 * time.Second, Known: true}, 30*time.Second)
	ex.plan(rung, ahead)
	if left != 90*time.Second {
		t.Errorf("after a rung that took 1.5× its plan: %v left, want 1m30s", left)
	}
	ex.record(rungSpec{Expect: 20 * time.Second, Known: true}, 170*time.Second)
	ex.plan(rung, ahead)
	if left != 2*time.Minute {
		t.Errorf("after rungs that took 5× their plan: %v left, want at most twice the plan's", left)
	}
}

// The H200 run of docs/run-h200-repeat.md: after the second synchronous block, 2m58s into the load
// (a 256-token request alone ~25 s, the probe at c=128 514 tok/s), five constant rates needed about
// 6m24s with 5m6s left, and the load ran 23 % past its budget. The ladder now holds as many rates as
// fit, down to three, and says what fewer than five give up.
func TestSlowEngineLadderKeepsTheBudgetBelowFiveRates(t *testing.T) {
	probe := steadyProbe(128, 514)
	ex := planner(178*time.Second, 25*time.Second, 0.04, probe)
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	t.Logf("%d rates, %v planned of %v left: %s", len(specs), planned(specs).Round(time.Second), ex.left().Round(time.Second), note)
	if len(specs) < budgetRates || len(specs) >= minRates || planned(specs) > ex.left() {
		t.Errorf("%d rates planned for %v with %v left: want %d to %d within it", len(specs), planned(specs), ex.left(), budgetRates, minRates-1)
	}
	if !strings.Contains(note, "fewer than the 5 rates") {
		t.Errorf("note %q: want what fewer than five give up", note)
	}
}

// After each constant rung the rest of the ladder is re-planned at the pace the rungs kept: the
// first rung of docs/run-h200-repeat.md took 112 s for a 60 s plan; with the four rungs after it at
// that pace past what is left, the rungs just below the top are dropped (the top kept, three in
// all at least), and the note says which and why. At the plan's pace nothing is dropped.
func TestReplanDropsRungsBelowTheTop(t *testing.T) {
	var specs []rungSpec
	for i := range 5 {
		specs = append(specs, rungSpec{Rate: 0.5 * float64(i+1), Expect: time.Minute, Known: true})
	}
	ex := planner(3*time.Minute, 25*time.Second, 0.04, steadyProbe(128, 514)) // 5 m left
	ex.record(specs[0], time.Minute)
	if got, why := ex.replan(specs, 1); len(got) != 5 || why != "" {
		t.Errorf("at the plan's pace: %d rungs left (%q), want all 5", len(got), why)
	}
	ex = planner(5*time.Minute, 25*time.Second, 0.04, steadyProbe(128, 514)) // 3 m left
	ex.record(specs[0], 112*time.Second)
	ex.record(specs[1], 60*time.Second) // two rungs, 172 s for 120 s planned: 1.43×
	got, why := ex.replan(append([]rungSpec(nil), specs...), 2)
	t.Logf("%d rungs: %s", len(got), why)
	if len(got) != 4 || got[3].Rate != 2.5 || got[2].Rate != 1.5 || !strings.Contains(why, "rate(s) at 2 req/s were dropped") || !strings.Contains(why, "1.43×") {
		t.Errorf("%d rungs (top %.3g): %q; want the one below the top dropped", len(got), got[len(got)-1].Rate, why)
	}
	ex.record(specs[2], 10*time.Minute) // far behind: down to three, never fewer
	if got, _ = ex.replan(append([]rungSpec(nil), specs...), 2); len(got) != budgetRates || got[2].Rate != 2.5 {
		t.Errorf("far behind: %d rungs left, want %d with the top", len(got), budgetRates)
	}
}

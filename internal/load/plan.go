package load

import (
	"fmt"
	"strings"
	"time"
)

// The sweep's plan (README, "Time budget"): each probe and constant rung is sized from what the
// earlier rungs measured (steady), and its length predicted (rungSpec.Expect: when its level should
// hold what its figures need, plus its tail). The sweep plans against load.time_budget: the knee
// search probes no further, the ladder holds fewer constant rates (at least minRates, spread over the
// same range), and it neither climbs nor reruns, when the planned lengths would pass what is left of
// it. No rung is shortened for it: each still runs until its steady state held, or is transient.

// minRates is the fewest constant rates the budget leaves a ladder while it can: the saturation
// analysis reads an unsaturated ladder from five rungs (analysis.AnalyzeSaturation). budgetRates is
// the fewest it leaves at all: a slow engine's five levelled rungs can take longer than a whole
// budget (an H200 under transformers: 60–110 s each, 6m24s for five with 5m6s left), and a load
// that ends within its budget is worth more than telling an unsaturated ladder; three still show
// the curve up to the probe's peak and its knee.
const (
	minRates    = 5
	budgetRates = 3
)

// tempo is what the earlier rungs of a sweep measured, that the later ones are planned by: a
// full-length request's time alone (the synchronous rung), and at the best steady probe its time
// per request, sustained rate and concurrency (0: none yet).
type tempo struct {
	alone, probeReq time.Duration
	probeRate       float64
	probeConc       int
}

// perReq is the time a request takes at an open-loop rate: from a request's time alone (rate 0)
// up to the best steady probe's at its rate, in proportion; at least the time alone.
func (p tempo) perReq(rate float64) time.Duration {
	if p.probeRate <= 0 || p.probeReq <= p.alone {
		return p.alone
	}
	f := min(rate/p.probeRate, 1)
	return p.alone + time.Duration(f*float64(p.probeReq-p.alone))
}

// onset is when an open loop at rate levels: once its first requests complete (a request's time),
// or, past the engine's capacity, once its in-flight count reaches the probe's concurrency (Little's
// law: the engine's batch is full there, and its output rate flat while the queue grows).
func (p tempo) onset(rate float64) time.Duration {
	t := p.perReq(rate)
	if p.probeConc > 0 && rate > 0 {
		t = min(t, time.Duration(float64(p.probeConc)/rate*float64(time.Second)))
	}
	return t
}

// steady measures a sweep rung in its steady state (level.go): planned for at least max_duration
// and for perReq (the time a request takes at its load, from the earlier rungs: its ramp) plus a
// window that holds levelMinDone completions at its rate, extended up to load.max_rung_duration.
// A slow engine gets longer rungs; a fast one's stay at max_duration. onset is when its level is
// expected to begin (0 for a closed loop: its in-flight count is level from the start).
//
// It also predicts the rung's length (Expect): the plateau test stops it once the flat part holds
// a third of the rung (so at least onset/2 past the onset), its completions and its planned
// length; then its tail. A request sent once the level began ends a request's time later: when that
// is past the tail too, the tail could complete no measured request (only the ramp's, whose
// latencies are left out), so it is cut to sweepTail rather than waited for.
func (ex *executor) steady(s rungSpec, perReq, onset time.Duration) rungSpec {
	s.Steady, s.Cap, s.Slice = true, time.Duration(ex.cfg.MaxRungDuration), sliceFor(s.Duration)
	win := time.Duration(levelMinSlices) * s.Slice
	if s.Rate > 0 {
		win = max(win, time.Duration(float64(levelMinDone)/s.Rate*float64(time.Second)))
	}
	s.Duration = min(max(s.Duration, perReq+win), max(s.Cap, s.Duration))
	stop := min(max(s.Duration, onset+max(onset/2, win)), max(s.Cap, s.Duration))
	s = ex.tail(s)
	if onset+perReq >= stop+s.Drain {
		s.Drain = min(s.Drain, sweepTail)
	}
	s.Expect = stop + min(s.Drain, perReq)
	if perReq > s.Drain {
		s.Expect += settleCut // the cut requests' settle
	}
	return s
}

// constant is the constant rung at rate, planned by p (its index not yet taken).
func (ex *executor) constant(p tempo, rate float64) rungSpec {
	s := ex.steady(ex.newSpec(kindConstant, 0, rate), p.perReq(rate), p.onset(rate))
	s.Known = p.probeReq > 0
	return s
}

// ladder plans the constant rates over (lo, hi]: load.rates of them, or fewer, spread over the same
// range, when their planned lengths would pass left (what is left of load.time_budget); never fewer
// than minRates (or load.rates when it asks for fewer). note says why when fewer, or when even the
// fewest pass the budget ("": all planned, within it).
func (ex *executor) ladder(p tempo, lo, hi float64, left time.Duration) (specs []rungSpec, note string) {
	want := ex.cfg.Rates
	least := min(budgetRates, want)
	for n := want; n >= least; n-- {
		specs = ex.rates(p, lo, hi, n)
		if planned(specs) <= left || n == least {
			break
		}
	}
	n, total := len(specs), planned(specs)
	budget := time.Duration(ex.cfg.TimeBudget)
	first, last := specs[0].Expect, specs[0].Expect // the shortest and longest
	for _, s := range specs {
		first, last = min(first, s.Expect), max(last, s.Expect)
	}
	switch {
	case total > left:
		note = fmt.Sprintf("%d constant rates (the fewest the budget leaves) need about %v (%v to %v each: a request takes %v to %v at their rates), past the %v left of load.time_budget (%v): the load runs over it",
			n, total.Round(time.Second), first.Round(time.Second), last.Round(time.Second), p.perReq(specs[0].Rate).Round(time.Second), p.perReq(specs[n-1].Rate).Round(time.Second), left.Round(time.Second), budget)
	case n < want:
		note = fmt.Sprintf("%d of load.rates' %d constant rates, over the same range: each needs %v to %v to level on this engine (a request takes %v to %v at their rates), and %d would need about %v, past the %v left of load.time_budget (%v)",
			n, want, first.Round(time.Second), last.Round(time.Second), p.perReq(specs[0].Rate).Round(time.Second), p.perReq(specs[n-1].Rate).Round(time.Second),
			n+1, planned(ex.rates(p, lo, hi, n+1)).Round(time.Second), left.Round(time.Second), budget)
	}
	if n < min(minRates, want) {
		note += fewRates
	}
	return specs, note
}

// fewRates is what a ladder of fewer than minRates gives up.
var fewRates = fmt.Sprintf("; fewer than the %d rates that tell a ladder stopped below the knee, so its peak is read as measured, never as a lower bound (a longer load.time_budget keeps them)", minRates)

// replan drops constant rungs still ahead (specs[done:]) when, at the pace the rungs so far kept
// against their plan (drift), they would pass what is left of load.time_budget: the rung below the
// top first, then the next below it, keeping the top (it reaches the probe's peak) and at least
// budgetRates in all. It returns the ladder left and what it dropped ("": nothing).
func (ex *executor) replan(specs []rungSpec, done int) ([]rungSpec, string) {
	var dropped []string
	for len(specs)-done >= 2 && len(specs) > min(budgetRates, ex.cfg.Rates) {
		need := time.Duration(ex.drift() * float64(planned(specs[done:])))
		if need <= ex.left() {
			break
		}
		cut := len(specs) - 2
		dropped = append(dropped, fmt.Sprintf("%.3g", specs[cut].Rate))
		specs = append(specs[:cut:cut], specs[cut+1:]...)
	}
	if len(dropped) == 0 {
		return specs, ""
	}
	note := fmt.Sprintf("re-planned after %d constant rung(s): they took %.2f× their plan, so the rate(s) at %s req/s were dropped to end within load.time_budget (%v)",
		done, ex.drift(), strings.Join(dropped, ", "), time.Duration(ex.cfg.TimeBudget))
	if len(specs) < min(minRates, ex.cfg.Rates) {
		note += fewRates
	}
	return specs, note
}

// rates is n constant rungs at lo + (hi − lo) × i / n, i = 1..n.
func (ex *executor) rates(p tempo, lo, hi float64, n int) []rungSpec {
	specs := make([]rungSpec, n)
	for i := range specs {
		specs[i] = ex.constant(p, lo+(hi-lo)*float64(i+1)/float64(n))
	}
	return specs
}

// planned is the sum of the rungs' predicted lengths.
func planned(specs []rungSpec) time.Duration {
	var d time.Duration
	for _, s := range specs {
		d += s.Expect
	}
	return d
}

// left is what is left of load.time_budget for the rungs being planned: the synchronous blocks
// still to run keep theirs (ex.reserve).
func (ex *executor) left() time.Duration {
	return time.Duration(ex.cfg.TimeBudget) - ex.rn.c.since() - ex.reserve()
}

// plan reports the time left to the progress (Options.OnPlan) as a rung starts: its own predicted
// length and that of the rungs planned after it (ahead), scaled by how the rungs planned from a
// measured pace so far compared with their plan (drift).
func (ex *executor) plan(s rungSpec, ahead []rungSpec) {
	if ex.o.OnPlan == nil || s.Expect <= 0 {
		return
	}
	ex.o.OnPlan(len(ahead)+ex.blocksLeft, time.Duration(ex.drift()*float64(s.Expect+planned(ahead)))+ex.reserve())
}

// Bounds of drift: a rung that has not narrowed its rate runs on to twice its plan (levelWatch).
const minDrift, maxDrift = 0.5, 2.0

// drift is the ratio of the time the rungs planned from a measured pace took to the time they were
// planned for (1 before any): on a busy client a fast engine's rungs run on to narrow their rate,
// and the rungs ahead will too. It scales only what the progress says, never the plan itself.
func (ex *executor) drift() float64 {
	if ex.plannedFor <= 0 {
		return 1
	}
	return min(max(float64(ex.took)/float64(ex.plannedFor), minDrift), maxDrift)
}

// record adds a rung planned from a measured pace (Known) to drift: it was planned for s.Expect and
// took took.
func (ex *executor) record(s rungSpec, took time.Duration) {
	if s.Known && s.Expect > 0 {
		ex.plannedFor += s.Expect
		ex.took += took
	}
}

package load

import (
	"fmt"
	"strings"
	"time"
)

// The sweep's plan (README, "Time budget"): each probe and constant rung is sized from what the
// earlier rungs measured (steady) and its length predicted (rungSpec.Expect). When the planned
// lengths would pass what is left of load.time_budget, the knee search probes no further, the ladder
// holds fewer rates, and it neither climbs nor reruns. No rung is shortened for it.

// minRates is the fewest constant rates the budget leaves a ladder while it can: the saturation
// analysis reads an unsaturated ladder from five. budgetRates is the fewest at all: a slow engine's
// five can pass a whole budget (an H200 under transformers: 6m24s for five with 5m6s left), and three
// still show the curve up to the probe's peak.
const (
	minRates    = 5
	budgetRates = 3
)

// tempo is what the later rungs of a sweep are planned by: a request's time alone, and the best steady
// probe's time per request, sustained rate and concurrency (0: none yet).
type tempo struct {
	alone, probeReq time.Duration
	probeRate       float64
	probeConc       int
}

// perReq is a request's time at an open-loop rate: from its time alone up to the probe's, in proportion.
func (p tempo) perReq(rate float64) time.Duration {
	if p.probeRate <= 0 || p.probeReq <= p.alone {
		return p.alone
	}
	f := min(rate/p.probeRate, 1)
	return p.alone + time.Duration(f*float64(p.probeReq-p.alone))
}

// onset is when an open loop at rate levels: once its first requests complete, or, past capacity,
// once its in-flight count reaches the probe's concurrency (Little's law: the batch is full).
func (p tempo) onset(rate float64) time.Duration {
	t := p.perReq(rate)
	if p.probeConc > 0 && rate > 0 {
		t = min(t, time.Duration(float64(p.probeConc)/rate*float64(time.Second)))
	}
	return t
}

// steady measures a sweep rung in its steady state (level.go): planned for at least max_duration and
// for perReq (its ramp) plus a window that holds levelMinDone completions, up to
// load.max_rung_duration. onset is when its level should begin (0 for a closed loop).
//
// It also predicts the rung's length (Expect): the plateau test stops it once the flat part holds a
// third of the rung (so onset/2 past the onset), then its tail. When a request sent at the onset
// would end past the tail too, the tail could complete no measured request: it is cut to sweepTail.
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

// ladder plans the constant rates over (lo, hi]: load.rates, or fewer (budgetRates) to fit left; note says why.
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

// replan drops constant rungs still ahead (specs[done:]) when, at the pace kept so far (drift), they
// would pass what is left of load.time_budget: the rung below the top first, keeping the top and at
// least budgetRates. It returns the ladder left and what it dropped ("": nothing).
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

// left is what is left of load.time_budget, less the synchronous blocks still to run (reserve).
func (ex *executor) left() time.Duration {
	return time.Duration(ex.cfg.TimeBudget) - ex.rn.c.since() - ex.reserve()
}

// plan reports the time left to Options.OnPlan as a rung starts, scaled by drift.
func (ex *executor) plan(s rungSpec, ahead []rungSpec) {
	if ex.o.OnPlan == nil || s.Expect <= 0 {
		return
	}
	ex.o.OnPlan(len(ahead)+ex.blocksLeft, time.Duration(ex.drift()*float64(s.Expect+planned(ahead)))+ex.reserve())
}

// Bounds of drift: a rung that has not narrowed its rate runs on to twice its plan (levelWatch).
const minDrift, maxDrift = 0.5, 2.0

// drift is the rungs' time over their plan (1 before any); it scales only the progress, never the plan.
func (ex *executor) drift() float64 {
	if ex.plannedFor <= 0 {
		return 1
	}
	return min(max(float64(ex.took)/float64(ex.plannedFor), minDrift), maxDrift)
}

// record adds a rung planned from a measured pace (Known) to drift.
func (ex *executor) record(s rungSpec, took time.Duration) {
	if s.Known && s.Expect > 0 {
		ex.plannedFor += s.Expect
		ex.took += took
	}
}

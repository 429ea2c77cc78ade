package load

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Knee search: where output tok/s stops growing, instead of trusting max_concurrency to be past it.
const (
	// kneeGain is the least growth in output tok/s that makes doubling the probe's concurrency worth it.
	kneeGain = 0.05
	// kneeLimitFactor bounds the search when the engine's max_num_seqs is unknown: max_concurrency × it.
	kneeLimitFactor = 8
	// kneeQueue: a median queue above this share of the probe's concurrency, and above one request,
	// means the engine's batch is full (a few requests waiting for a prefill slot do not).
	kneeQueue = 0.1
	// kneeQueueSamples is the least /metrics samples a probe's queue median rests on: an instant when
	// requests had just arrived reads 3 of 4 waiting on an engine with a 32-sequence batch.
	kneeQueueSamples = 3
	// kneeOvershoot places the top constant rung this far past the best probe's rate: a closed loop
	// reads the capacity a little low (slots idle between requests), and the top two rungs must both
	// be past it for the curve to show its plateau.
	kneeOvershoot = 1.25
)

// maxClimb bounds the rungs a truncated ladder adds above its planned top.
const maxClimb = 3

// climb extends a ladder whose top rung still climbs past the probe's peak (the probe under-read the
// capacity, so the ladder was placed too low): upward, step req/s per rung, until the output stops
// growing, at most maxClimb rungs. A transient top rung does not climb.
func (ex *executor) climb(ctx context.Context, a *attempt, n int, outs []float64, probe results.Run, step float64, k *results.Knee) []float64 {
	peak := probe.OutputTokS
	// A top rung that never levelled read its ramp: its climb says nothing about the capacity.
	topLevel := func() bool { return len(a.runs) == 0 || a.runs[len(a.runs)-1].TransientReason() == "" }
	for k.ClimbedRungs < maxClimb && step > 0 && topLevel() && analysis.AnalyzeSaturation(outs, peak).Truncated {
		rate := k.LadderTopReqS + step
		s := ex.constant(ex.tempo, rate)
		if s.Expect > ex.left() {
			k.Plan = joinNote(k.Plan, fmt.Sprintf("the ladder still climbed past the probe's peak, but a rung at %.3g req/s would need about %v, past the %v left of load.time_budget (%v): not climbed",
				rate, s.Expect.Round(time.Second), max(ex.left(), 0).Round(time.Second), time.Duration(ex.cfg.TimeBudget)))
			break
		}
		r := ex.one(ctx, a, ex.take(s), n)
		if ctx.Err() != nil {
			return outs
		}
		outs = append(outs, r.OutputTokS)
		k.ClimbedRungs++
		k.LadderTopReqS = rate
	}
	if k.ClimbedRungs > 0 {
		logf(ex.o.Log, "the ladder was still climbing past the probe's peak: %d rung(s) added up to %.3g req/s", k.ClimbedRungs, k.LadderTopReqS)
	}
	return outs
}

// findKnee doubles the throughput probe's concurrency up to the engine's max_num_seqs (more only
// queues) while /metrics shows no steady queue (the batch is full), or, without it, while output
// tok/s grows by at least kneeGain. A probe that never levels (transient) ends the search without a
// knee. Output that stopped growing, or a full queue, is past the knee: a finding (Knee.PastKnee),
// never an error. It returns the best probe and records each step.
func (ex *executor) findKnee(ctx context.Context, a *attempt, n int, probe results.Run, probeAt [2]time.Duration) (results.Run, *results.Knee) {
	k := &results.Knee{Limit: ex.o.MaxNumSeqs, LimitSource: "the engine's max_num_seqs"}
	if k.Limit <= 0 {
		k.Limit = kneeLimitFactor * ex.cfg.MaxConcurrency
		k.LimitSource = fmt.Sprintf("%d × max_concurrency (the engine's max_num_seqs unknown)", kneeLimitFactor)
	}
	best := probe
	wait := ex.waiting(probeAt)
	k.Probes = append(k.Probes, results.KneeProbe{Concurrency: probe.Concurrency, OutputTokS: probe.OutputTokS, ServerWaiting: wait, Completed: probe.Requests.Successful})
	for c, last := probe.Concurrency, probe; ; {
		// A probe that never levelled measured a ramp: no knee can be read from it, nor past it.
		if why := last.TransientReason(); why != "" {
			k.Reason = fmt.Sprintf("the probe at concurrency %d did not reach a steady state (%s): the knee is not measured", c, why)
			break
		}
		if wait > max(kneeQueue*float64(c), 1) {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("the server queued a median of %.0f requests at concurrency %d: its batch is full", wait, c)
			break
		}
		next := min(2*c, k.Limit)
		if next <= c {
			k.Reason = fmt.Sprintf("concurrency %d is the limit (%s)", c, k.LimitSource)
			break
		}
		// A request at twice the concurrency takes up to twice as long (Little's law): a probe whose
		// requests and window would outlast load.max_rung_duration cannot level.
		win := time.Duration(levelMinSlices) * sliceFor(time.Duration(ex.cfg.MaxDuration))
		ahead := time.Duration(float64(ex.lastProbeTime) * float64(next) / float64(c))
		if ahead+win >= time.Duration(ex.cfg.MaxRungDuration) {
			k.Reason = fmt.Sprintf("a probe at concurrency %d would need about %v a request (%v at %d), past load.max_rung_duration (%v): it could not level", next, ahead.Round(time.Second), ex.lastProbeTime.Round(time.Second), c, time.Duration(ex.cfg.MaxRungDuration))
			break
		}
		// The probe and the least ladder after it must fit the budget: the ladder measures more.
		pred, why := ex.probeFits(best, next, ahead)
		if why != "" {
			k.Reason = why
			k.Plan = joinNote(k.Plan, fmt.Sprintf("no probe past concurrency %d: %s", c, why))
			break
		}
		lo, hi := ex.ladderRange(best)
		ex.ahead, _ = ex.ladder(ex.tempoAt(best), lo, hi, ex.left()-pred.Expect)
		from := ex.rn.c.since()
		ps := ex.take(ex.steady(ex.newSpec(kindThroughput, next, 0), ex.probeTime(), 0))
		ps.Expect, ps.Known = max(ps.Expect, pred.Expect), true // planned from the last probe's time; it may need up to pred's
		r := ex.one(ctx, a, ps, n)
		if ctx.Err() != nil {
			k.Reason = "the search was interrupted"
			break
		}
		if broken(r) {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("the probe at concurrency %d neither completed a request nor streamed a token (errors: %s): past the knee", next, results.ErrorCounts(r.Errors))
			break
		}
		if ex.lastCPU >= CPULimit {
			k.Reason = fmt.Sprintf("this process used %.0f%% of the CPU at concurrency %d: more streams would measure the client, not the server", 100*ex.lastCPU, next)
			break
		}
		wait = ex.waiting([2]time.Duration{from, ex.rn.c.since()})
		k.Probes = append(k.Probes, results.KneeProbe{Concurrency: next, OutputTokS: r.OutputTokS, ServerWaiting: wait, Completed: r.Requests.Successful})
		gain := r.OutputTokS/best.OutputTokS - 1
		if r.OutputTokS > best.OutputTokS {
			best = r
		}
		// An empty server queue says the batch still has room, whatever one noisy gain says.
		if gain < kneeGain && wait < 0 {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("output tok/s grew %+.1f%% from concurrency %d to %d (less than %.0f%%): past the knee", 100*gain, c, next, 100*kneeGain)
			break
		}
		c, last = next, r
	}
	k.Concurrency = best.Concurrency
	logf(ex.o.Log, "knee search: %s; the ladder tops at concurrency %d (%.0f tok/s)", k.Reason, k.Concurrency, best.OutputTokS)
	return best, k
}

// probeFits predicts the probe at next and says why it and the least ladder would pass the budget.
func (ex *executor) probeFits(best results.Run, next int, perReq time.Duration) (rungSpec, string) {
	pred := ex.steady(ex.newSpec(kindThroughput, next, 0), perReq, 0)
	lo, hi := ex.ladderRange(best)
	rest := ex.rates(ex.tempoAt(best), lo, hi, min(minRates, ex.cfg.Rates)) // a probe never costs the ladder its five
	if need := pred.Expect + planned(rest); need > ex.left() {
		return pred, fmt.Sprintf("a probe at concurrency %d would take about %v (%v a request), and the %d constant rates after it about %v: past the %v left of load.time_budget (%v)",
			next, pred.Expect.Round(time.Second), perReq.Round(time.Second), len(rest), planned(rest).Round(time.Second), max(ex.left(), 0).Round(time.Second), time.Duration(ex.cfg.TimeBudget))
	}
	return pred, ""
}

// waiting is the median server queue scraped in at (its first quarter out), or -1 with too few.
func (ex *executor) waiting(at [2]time.Duration) float64 {
	if ex.sc == nil {
		return -1
	}
	from := at[0] + (at[1]-at[0])/4
	var w []float64
	ex.sc.mu.Lock()
	for _, s := range ex.sc.res.Samples {
		t := time.Duration(s.T * float64(time.Second))
		if t >= from && t <= at[1] {
			w = append(w, s.Waiting)
		}
	}
	ex.sc.mu.Unlock()
	if len(w) < kneeQueueSamples {
		return -1
	}
	slices.Sort(w)
	return w[len(w)/2]
}

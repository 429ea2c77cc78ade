package load

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Knee search and early stop: the sweep finds where output tok/s stops growing instead of trusting
// max_concurrency to be past it, and ends a rung as soon as its output rate is known well enough.
const (
	// kneeGain is the least growth in output tok/s that makes doubling the probe's concurrency worth it.
	kneeGain = 0.05
	// kneeLimitFactor bounds the search when the engine's max_num_seqs is unknown: max_concurrency × it.
	kneeLimitFactor = 8
	// kneeQueue: a median queue above this share of the probe's concurrency means the engine's batch is
	// full (a few requests waiting for a prefill slot do not).
	kneeQueue = 0.1
	// kneeOvershoot places the top constant rung this far past the best probe's rate: a closed-loop probe
	// reads the capacity a little low (slots idle between requests), and the top two rungs must both be
	// past the true capacity for the curve to show its plateau.
	kneeOvershoot = 1.25

	// steadySlice is the early-stop watcher's sampling slice; minSteady the least a rung runs.
	steadySlice = 250 * time.Millisecond
	minSteady   = 6 * time.Second
	// steadyCI is the relative half-width of the 95 % interval of the mean output rate, and steadyDrift
	// the largest relative difference between the two halves of the steady part, below which a rung stops.
	steadyCI    = 0.03
	steadyDrift = 0.05
	// minSteadySlices: the steady part (after one mean E2E of ramp) must hold at least this many slices.
	minSteadySlices = 16
)

// maxClimb bounds the rungs a truncated ladder adds above its planned top.
const maxClimb = 3

// climb extends a ladder whose top rung still climbs past the probe's peak (truncated: the probe
// under-read the capacity, e.g. a closed loop idling slots between requests or a client short of CPU,
// so the ladder was placed too low). Retrying the same ladder would stop at the same place, so it goes
// on upward at its own spacing, step req/s per rung, until the output stops growing, at most maxClimb
// rungs, and records how many it added. Rungs too short for the knee search (tooShort) do not climb:
// their probe was never raised, so the ladder sits far below the knee, a few more rungs would not
// reach it, and the lower bound is already said.
func (ex *executor) climb(ctx context.Context, a *attempt, n int, outs []float64, probe results.Run, step float64, k *results.Knee) []float64 {
	if tooShort(time.Duration(ex.cfg.MaxDuration), probe) {
		return outs
	}
	peak := probe.OutputTokS
	for k.ClimbedRungs < maxClimb && step > 0 && analysis.AnalyzeSaturation(outs, peak).Truncated {
		rate := k.LadderTopReqS + step
		r := ex.one(ctx, a, ex.steady(ex.spec(kindConstant, 0, rate)), n)
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

// minKneeRung is the shortest rung the search always runs with: at higher concurrency a request takes
// seconds, and a shorter probe would measure its ramp, not its rate. A shorter rung still searches
// when the probe's requests took at most half of it (the simulator's quick profile).
// A variable so that a test can search with short rungs.
var minKneeRung = 10 * time.Second

// tooShort reports whether rungs of d are too short to search or climb with: shorter than
// minKneeRung and than two of the probe's requests (a probe that short measures its ramp).
func tooShort(d time.Duration, probe results.Run) bool {
	return d < minKneeRung && 2*e2e(probe) > d
}

func e2e(r results.Run) time.Duration { return time.Duration(r.E2E.Mean * float64(time.Millisecond)) }

// findKnee raises the throughput probe's concurrency, doubling, up to the engine's max_num_seqs (more
// only queues): while the server's /metrics shows no steady queue (a queue means the engine's batch is
// already full), or, without /metrics, while output tok/s grows by at least kneeGain. A probe that
// completed no request in its window is over capacity: past the knee, as is one whose output stopped
// growing or a full server queue; either is a finding (Knee.PastKnee), never an error. It returns the
// best probe and records each step.
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
		if last.Requests.Successful == 0 {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("the probe at concurrency %d streamed %.0f tok/s but completed no request in its %.0f s window: over capacity, past the knee", c, last.OutputTokS, last.WindowSeconds)
			break
		}
		if d := time.Duration(ex.cfg.MaxDuration); tooShort(d, last) {
			k.Reason = fmt.Sprintf("rungs of %v are too short to measure past the first probe (its requests took %v: the search needs rungs of %v, or of two requests' time)", d, e2e(last).Round(time.Millisecond), minKneeRung)
			break
		}
		if wait > kneeQueue*float64(c) {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("the server queued a median of %.0f requests at concurrency %d: its batch is full", wait, c)
			break
		}
		next := min(2*c, k.Limit)
		if next <= c {
			k.Reason = fmt.Sprintf("concurrency %d is the limit (%s)", c, k.LimitSource)
			break
		}
		from := ex.rn.c.since()
		r := ex.one(ctx, a, ex.tail(ex.spec(kindThroughput, next, 0)), n)
		if ctx.Err() != nil {
			k.Reason = "the search was interrupted"
			break
		}
		if broken(r) {
			k.PastKnee = true
			k.Reason = fmt.Sprintf("the probe at concurrency %d neither completed a request nor streamed a token (errors: %v): past the knee", next, r.Errors)
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
		// With the server's queue in view, an empty queue says the batch still has room, whatever one
		// noisy window's gain says; without it, the gain decides.
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

// waiting is the median of the server's queued requests scraped in [at[0], at[1]] (the ramp's first
// quarter left out), or -1 without samples.
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
	if len(w) == 0 {
		return -1
	}
	slices.Sort(w)
	return w[len(w)/2]
}

// steadyWatch ends a rung's dispatch (stop) once its output rate is steady: after minSteady, at least
// minSteadySlices slices past one mean E2E of ramp, enough completed requests for the bootstrap, a 95 %
// interval of the mean rate within ±steadyCI and the two halves within steadyDrift of each other. The
// reason goes to *why. It returns when ctx ends.
func steadyWatch(ctx context.Context, stop context.CancelFunc, tokens func() int64, e2e func() (time.Duration, int), why *string, mu *sync.Mutex) {
	t := time.NewTicker(steadySlice)
	defer t.Stop()
	var rates []float64
	last := tokens()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := tokens()
		rates = append(rates, float64(now-last)/steadySlice.Seconds())
		last = now
		elapsed := time.Duration(len(rates)) * steadySlice
		meanE2E, done := e2e()
		if elapsed < minSteady || done < 20 {
			continue
		}
		skip := int(math.Ceil(float64(meanE2E) / float64(steadySlice)))
		if len(rates)-skip < minSteadySlices {
			continue
		}
		if r, ok := steady(rates[skip:]); ok {
			mu.Lock()
			*why = fmt.Sprintf("output rate steady at %.0f tok/s after %v (95%% interval within ±%.0f%%, halves within %.0f%%)", r, elapsed, 100*steadyCI, 100*steadyDrift)
			mu.Unlock()
			stop()
			return
		}
	}
}

// steady reports whether per-slice rates have a tight mean (normal 95 % interval within ±steadyCI) and
// no trend (the halves' means within steadyDrift), and returns the mean.
func steady(rates []float64) (float64, bool) {
	n := len(rates)
	mean := func(s []float64) float64 {
		var t float64
		for _, v := range s {
			t += v
		}
		return t / float64(len(s))
	}
	m := mean(rates)
	if m <= 0 {
		return 0, false
	}
	var ss float64
	for _, v := range rates {
		ss += (v - m) * (v - m)
	}
	sd := math.Sqrt(ss / float64(n-1))
	hw := 1.96 * sd / math.Sqrt(float64(n))
	drift := math.Abs(mean(rates[n/2:])-mean(rates[:n/2])) / m
	return m, hw <= steadyCI*m && drift <= steadyDrift
}

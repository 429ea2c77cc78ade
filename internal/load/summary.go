package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Client self-check limits: beyond them the client, not the server, may be what was measured.
const (
	// LagLimit is the p99 lag behind schedule above which a run is client-limited.
	LagLimit = 10 * time.Millisecond
	// minLagSamples: below it a lag p99 is one unlucky request, not a pattern.
	minLagSamples = 50
	// minLateRequests: at least this many requests past LagLimit (and 1 % of them) make the client
	// the pace-setter: one scheduling blip must not make a quiet machine's run undecided.
	minLateRequests = 3
	// CPULimit is the share of all cores the client may use before it is deemed saturated.
	CPULimit = 0.90
	// bootstrapResamples and ciLevel set the confidence intervals on gated figures.
	bootstrapResamples = 200
	ciLevel            = 0.95
	// maxBootstrapPool caps pooled samples fed to the bootstrap (a seeded subsample above it): a
	// million ITL gaps would take minutes; the interval is then slightly wider, never narrower.
	maxBootstrapPool = 20000
)

// summarize turns one rung's records into its results.Run: counts, latencies, rates, checks.
func summarize(o *rungOut, slo *analysis.SLO, seed uint64) results.Run {
	spec := o.spec
	run := results.Run{Kind: spec.Kind, Errors: map[string]int{}}
	if spec.openLoop() {
		run.TargetRate = spec.Rate
	} else {
		run.Concurrency = spec.Concurrency
	}
	win := o.winEnd - o.winStart
	run.WindowSeconds = win.Seconds()
	run.EndedBy = endedBy(o)
	t := newTally(o, slo)
	for _, r := range o.recs {
		t.count(&run, r)
	}
	if len(run.Errors) == 0 {
		run.Errors = nil
	}
	lat := t.sent
	// Open-loop rungs only: a closed-loop run's latencies can be gated, and its ramp is a burst.
	if len(t.sent.ttft) == 0 && o.level != nil && spec.openLoop() {
		lat, run.LatencyFrom = t.ramp, noneSent(len(t.ramp.ttft), t.ramp.e2e, win)
	}
	lat.summarize(&run, spec.openLoop())
	run.MeanOutputTokens = metrics.MeanStat(t.outToks)
	run.MeanPromptTokens = metrics.MeanStat(t.promptToks)
	if win > 0 {
		s := win.Seconds()
		run.OutputTokS = t.outInWin / s
		run.TotalTokS = (t.outInWin + t.promptInWin) / s
		run.ReqS = float64(t.doneInWin) / s
		if !slo.Empty() {
			g := float64(t.goodInWin) / s
			run.Goodput = &g
		}
	}
	run.CI = intervals(lat.ttft, lat.itl, lat.tpot, t.buckets, t.bucket, seed+uint64(spec.Index))
	run.ClientLimited, run.ClientReason = selfCheck(lat.lag, o.cpu, o.wall)
	run.ServerRefusing, run.ServerReason = acceptCheck(o)
	run.TokenBursts = burstCheck(o)
	run.WindowStartS = o.winStart.Seconds()
	run.Sizing = sizing(o)
	run.Steady = steadiness(o)
	run.ErrorStop = o.errStop
	if !run.ClientLimited {
		run.ClientLimited, run.ClientReason = rxBacklog(o)
	}
	return run
}

// tally is what summarize counts over a rung's records.
type tally struct {
	o                     *rungOut
	slo                   *analysis.SLO
	sent, ramp            latencies // of the requests sent in the window; of the ramp's completed in it
	outToks, promptToks   []float64
	outInWin, promptInWin float64 // tokens streamed inside the window
	doneInWin, goodInWin  int     // requests completed inside the window; of them, within the SLO
	bucket                time.Duration
	buckets               []float64 // output tokens per 1/40 of the window (nil: no window)
}

// newTally derives every record's figures and sizes the pools for them.
func newTally(o *rungOut, slo *analysis.SLO) *tally {
	t := &tally{o: o, slo: slo, bucket: (o.winEnd - o.winStart) / 40}
	if t.bucket > 0 {
		t.buckets = make([]float64, 40)
	}
	nITL := 0
	for _, r := range o.recs {
		r.derive()
		nITL += len(r.ITLMs)
	}
	t.sent.itl = make([]float64, 0, nITL)
	return t
}

// inWindow says whether at is inside the measured window.
func (t *tally) inWindow(at time.Duration) bool { return at >= t.o.winStart && at <= t.o.winEnd }

// streamed adds r's tokens (and prompt) streamed inside the window; true when it streamed any.
func (t *tally) streamed(r *Record) bool {
	streamed := false
	for _, m := range r.marks {
		if t.inWindow(m.at) {
			streamed = streamed || m.tok > 0
			t.outInWin += float64(m.tok)
			if t.buckets != nil {
				t.buckets[min(int((m.at-t.o.winStart)/t.bucket), 39)] += float64(m.tok)
			}
		}
	}
	if len(r.marks) > 0 && t.inWindow(r.marks[0].at) {
		t.promptInWin += float64(r.PromptTokens)
	}
	return streamed
}

// count adds one request to run's counts and to the tally's samples.
func (t *tally) count(run *results.Run, r *Record) {
	// A ramp request counts like a measured one unless it ended before the window: latencies aside.
	warm := r.Warmup && !(r.ramp && (!r.ok() || r.end >= t.o.winStart))
	if t.streamed(r) && !warm {
		run.Requests.Streamed++
	}
	if !outcome(run, r, warm) {
		return
	}
	openLoop := t.o.spec.openLoop()
	if r.ramp {
		if t.inWindow(r.end) {
			t.doneInWin++
			t.ramp.add(r, openLoop)
		}
		return
	}
	t.sent.add(r, openLoop)
	t.outToks = append(t.outToks, float64(r.OutputTokens))
	t.promptToks = append(t.promptToks, float64(r.PromptTokens))
	if t.inWindow(r.end) {
		t.doneInWin++
		if t.slo.Met(r.TTFTMs, r.TPOTMs, r.E2EMs) {
			t.goodInWin++
		}
	}
}

// outcome counts how request r ended, and says whether it succeeded (its latencies are samples).
func outcome(run *results.Run, r *Record, warm bool) bool {
	switch {
	case warm:
		run.Requests.Warmup++
		return false
	case r.Incomplete:
		run.Requests.Incomplete++
		return false
	case r.Error != "":
		run.Requests.Errored++
		run.Errors[r.Error]++
		run.ErrorSamples = sampleError(run.ErrorSamples, r, r.Error, r.Detail)
		return false
	case !r.ok():
		run.Requests.Errored++
		run.Errors[errCut]++
		run.ErrorSamples = sampleError(run.ErrorSamples, r, errCut, "no token came back")
		return false
	}
	run.Requests.Successful++
	return true
}

// latencies are the latency samples of a set of requests.
type latencies struct {
	ttft, ttftSched, itl, tpot, e2e, lag []float64
	ttfo, reasoning                      []float64 // reasoning answers only
}

func (l *latencies) add(r *Record, openLoop bool) {
	if !r.noLag {
		l.lag = append(l.lag, r.LagMs)
	}
	l.ttft = append(l.ttft, r.TTFTMs)
	if r.TTFOMs > 0 {
		l.ttfo, l.reasoning = append(l.ttfo, r.TTFOMs), append(l.reasoning, r.ReasoningMs)
	}
	if openLoop {
		l.ttftSched = append(l.ttftSched, r.TTFTFromScheduleMs)
	}
	l.itl = append(l.itl, r.ITLMs...)
	if r.OutputTokens > 1 {
		l.tpot = append(l.tpot, r.TPOTMs)
	}
	l.e2e = append(l.e2e, r.E2EMs)
}

// summarize sets run's latency figures from the samples.
func (l *latencies) summarize(run *results.Run, openLoop bool) {
	run.TTFT = metrics.Summarize(l.ttft)
	if len(l.ttfo) > 0 {
		ttfo, reasoning := metrics.Summarize(l.ttfo), metrics.Summarize(l.reasoning)
		run.TTFO, run.Reasoning = &ttfo, &reasoning
	}
	if openLoop {
		d := metrics.Summarize(l.ttftSched)
		run.TTFTFromSchedule = &d
	}
	slices.Sort(l.itl) // our own pool: sorted in place rather than copied (it can hold millions)
	run.ITL = metrics.SummarizeSorted(l.itl)
	run.TPOT = metrics.Summarize(l.tpot)
	run.E2E = metrics.Summarize(l.e2e)
	run.ClientLag = metrics.Summarize(l.lag)
}

// noneSent says where a steady rung's latencies come from when no request sent in its window
// completed: the n of its ramp that completed in it (e2e: their times), or none.
func noneSent(n int, e2e []float64, win time.Duration) string {
	if n == 0 {
		return fmt.Sprintf("none: no request completed in the %.0f s window (a rung whose requests take longer than its window; load.max_rung_duration longer, or load.output_tokens shorter, gives it some)", win.Seconds())
	}
	return fmt.Sprintf("the %d requests that completed in the %.0f s window, sent during the ramp before it opened: none sent in the window completed in time (a request took %.0f s, median)",
		n, win.Seconds(), metrics.Summarize(e2e).P50/1000)
}

// sizing says how a rung sized by completions ran (nil for a rung sized by time alone).
func sizing(o *rungOut) *results.RungSizing {
	spec := o.spec
	if !spec.sized() {
		return nil
	}
	z := &results.RungSizing{MinSamples: spec.MinSamples, Cap: results.Duration(spec.Cap), Completed: o.completed, ShortOutputTokens: o.shortTokens}
	for _, r := range o.recs {
		if !r.Warmup && o.shortTokens > 0 && r.RequestedTokens == o.shortTokens {
			z.ShortRequests++
		}
	}
	switch {
	case o.interrupted:
		z.Reason = fmt.Sprintf("interrupted with %d of %d requests completed", o.completed, spec.MinSamples)
		z.Cut = o.completed < spec.MinSamples
	case o.errStop != "":
		z.Cut = true
		z.Reason = fmt.Sprintf("%s, with %d of the %d completed requests compare.min_samples asks for", o.errStop, o.completed, spec.MinSamples)
	case o.enough:
		z.Reason = fmt.Sprintf("ran until %d requests completed (compare.min_samples %d)", o.completed, spec.MinSamples)
	default:
		z.Cut = true
		z.Reason = fmt.Sprintf("cut by load.max_rung_duration (%v) with %d of the %d completed requests compare.min_samples asks for: its latency figures are inconclusive; raise load.max_rung_duration, or shorten load.output_tokens", spec.Cap, o.completed, spec.MinSamples)
	}
	if z.ShortRequests > 0 {
		z.Reason += fmt.Sprintf("; %d requests asked for %d output tokens instead of %d (same prompt, so the same prefill at concurrency 1), so that the samples fit in load.max_duration", z.ShortRequests, o.shortTokens, o.fullTokens)
	}
	return z
}

// steadiness says how a steady rung levelled (nil for a rung not measured in its steady state).
func steadiness(o *rungOut) *results.RungSteady {
	if o.level == nil {
		return nil
	}
	onset, done, queue, why := o.level.get()
	st := &results.RungSteady{PlannedS: o.spec.Duration.Seconds(), Cap: results.Duration(o.spec.Cap), Reason: why, Queue: queue && done}
	switch {
	case done:
		st.OnsetS = onset.Seconds()
	case o.interrupted:
		st.Transient, st.Reason = true, "interrupted before it levelled: "+why
	case o.errStop != "":
		st.Transient, st.Reason = true, o.errStop
	default:
		st.Transient = true
		st.Reason = fmt.Sprintf("transient: %s, when load.max_rung_duration (%v) ended it; its figures are those of a ramp and decide no gate (raise load.max_rung_duration, or shorten load.output_tokens)", why, o.spec.Cap)
	}
	return st
}

// intervals bootstraps the judged figures (output tok/s: the window's 40 per-slice rates).
func intervals(ttft, itl, tpot, buckets []float64, bucket time.Duration, seed uint64) *results.Intervals {
	ci := &results.Intervals{
		TTFTP95: metrics.BootstrapQuantile(ttft, 0.95, ciLevel, bootstrapResamples, seed),
		TTFTP99: metrics.BootstrapQuantile(ttft, 0.99, ciLevel, bootstrapResamples, seed+1),
		ITLP95:  metrics.BootstrapQuantile(subsample(itl, maxBootstrapPool, seed), 0.95, ciLevel, bootstrapResamples, seed+2),
		TPOTP95: metrics.BootstrapQuantile(tpot, 0.95, ciLevel, bootstrapResamples, seed+4),
		TPOTP50: metrics.BootstrapQuantile(tpot, 0.5, ciLevel, bootstrapResamples, seed+5),
	}
	if bucket > 0 {
		rates := make([]float64, len(buckets))
		for i, b := range buckets {
			rates[i] = b / bucket.Seconds()
		}
		ci.OutputTokS = metrics.Bootstrap(rates, metrics.MeanStat, ciLevel, bootstrapResamples, seed+3)
	}
	if *ci == (results.Intervals{}) {
		return nil
	}
	return ci
}

// subsample returns at most n samples of s, drawn with replacement by a seeded generator.
func subsample(s []float64, n int, seed uint64) []float64 {
	if len(s) <= n {
		return s
	}
	rng := rand.New(rand.NewPCG(seed, 77))
	out := make([]float64, n)
	for i := range out {
		out[i] = s[rng.IntN(len(s))]
	}
	return out
}

// selfCheck says whether the client limited the run: lagging its schedule (lags, ms), or CPU-bound.
func selfCheck(lags []float64, cpu, wall time.Duration) (bool, string) {
	cores := runtime.NumCPU()
	late := 0
	for _, l := range lags {
		if l > float64(LagLimit)/1e6 {
			late++
		}
	}
	if len(lags) >= minLagSamples && late >= minLateRequests && float64(late) >= 0.01*float64(len(lags)) {
		lag := metrics.Summarize(lags)
		return true, fmt.Sprintf("CLIENT-LIMITED: %d of %d requests left more than %v behind schedule (p99 %.1f ms, max %.1f ms): the load generator, not the server, set the pace — use fewer streams or a bigger client machine",
			late, len(lags), LagLimit, lag.P99, lag.Max)
	}
	if wall > 0 {
		use := cpu.Seconds() / wall.Seconds()
		if use >= CPULimit*float64(cores) {
			return true, fmt.Sprintf("CLIENT-LIMITED: the load generator used %.0f%% CPU of %d cores (limit %.0f%%): its figures may be its own, not the server's", 100*use, cores, 100*CPULimit*float64(cores))
		}
	}
	return false, ""
}

// burstReqS is the highest completion rate in any 1 s slice of the window (reported, never gated).
func burstReqS(o *rungOut) float64 {
	win := o.winEnd - o.winStart
	if win < 2*time.Second {
		return 0
	}
	n := int(math.Ceil(win.Seconds()))
	counts := make([]int, n)
	for _, r := range o.recs {
		if r.ok() && !r.Warmup && r.end >= o.winStart && r.end <= o.winEnd {
			counts[min(int((r.end-o.winStart)/time.Second), n-1)]++
		}
	}
	return float64(slices.Max(counts[:n-1])) // the last slice may be partial
}

// rxBacklog reports a receive backlog that grows over the window: chunks of requests ending in its last
// third waited in the socket over LagLimit on average, twice as long as in its first. Kernel
// timestamps keep chunk times right while the client is late, not a client that never catches up.
func rxBacklog(o *rungOut) (bool, string) {
	third := (o.winEnd - o.winStart) / 3
	if third <= 0 {
		return false, ""
	}
	var first, last []float64
	for _, r := range o.recs {
		if r.Warmup || !r.ok() || r.rxN == 0 {
			continue
		}
		switch {
		case r.end >= o.winStart && r.end < o.winStart+third:
			first = append(first, r.RXLagMs)
		case r.end >= o.winEnd-third && r.end <= o.winEnd:
			last = append(last, r.RXLagMs)
		}
	}
	if len(first) < 5 || len(last) < 5 {
		return false, ""
	}
	f, l := metrics.MeanStat(first), metrics.MeanStat(last)
	if l > float64(LagLimit)/1e6 && l >= 2*f {
		return true, fmt.Sprintf("CLIENT-LIMITED: chunks waited in the socket %.1f ms on average late in the rung against %.1f ms early (limit %v): the client fell behind the stream and the backlog grew — use fewer streams or a bigger client machine", l, f, LagLimit)
	}
	return false, ""
}

// fillRX records how chunk times were taken and how long chunks waited in the socket.
func fillRX(l *results.Load, rx *rxStatus, waits []float64) {
	l.Client.ChunkTimes = rx.String()
	l.Client.Reader = rx.reader
	if len(waits) > 0 {
		d := metrics.Summarize(waits)
		l.Client.RXWait = &d
	}
}

// sampleError keeps r as evidence of its class, up to results.MaxErrorSamples of it.
func sampleError(have []results.ErrorSample, r *Record, class, detail string) []results.ErrorSample {
	n := 0
	for _, e := range have {
		if e.Class == class {
			n++
		}
	}
	if n >= results.MaxErrorSamples {
		return have
	}
	return append(have, results.ErrorSample{Class: class, Detail: detail, Index: r.Index, EndS: r.end.Seconds(),
		OutputTokens: r.OutputTokens, RequestedTokens: r.RequestedTokens})
}

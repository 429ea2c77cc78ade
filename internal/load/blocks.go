package load

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The sweep's synchronous rung runs in blocks spread over the load: before the probes, between the
// knee search and the ladder, after the ladder. Its latency gates drift most between runs (one
// H200's sync ITL p95 read 62.6 ms [61.6, 63.8] and 79.1 ms [78.6, 80.4] ten minutes apart), which
// one block's spread never shows. The rung's figures are over every block's requests, and their
// intervals hold the bootstrap over requests and the batch means over blocks (metrics.BatchMeans).

// SyncBlocks is how many blocks the sweep's synchronous rung runs in. Five were tried (bench/repeat,
// a 25 %-drifting simulated engine): their narrower intervals (t 2.78, not 4.30) left two runs of one
// GPU apart more often (4 of 6 pairs, against 1 of 9).
const SyncBlocks = 3

// nextBlock runs the synchronous rung's next block (2 … SyncBlocks), lined up where asked (beforeBlock).
func (ex *executor) nextBlock(ctx context.Context, a *attempt, index, n int) {
	b := SyncBlocks - ex.blocksLeft + 1
	ex.blocksLeft--
	ex.beforeBlock(ctx, b)
	if ctx.Err() == nil {
		ex.one(ctx, a, ex.blockSpec(index, b), n)
	}
}

// syncBlock is one block of the synchronous rung: its summary and its measured requests' samples.
type syncBlock struct {
	run                          results.Run
	startS, tookS                float64
	ttft, itl, tpot, e2e, outTok []float64
}

// blockSpec is block i (1-based) of the synchronous rung: its index, and a third of its length and
// completions. Each keeps the rung's cap: the first block's requests tell how long one takes.
func (ex *executor) blockSpec(index, i int) rungSpec {
	s := ex.newSpec(kindSynchronous, 1, 0)
	s.Index, s.Block = index, i
	s.MinSamples = (s.MinSamples + SyncBlocks - 1) / SyncBlocks
	s.Duration /= SyncBlocks
	s.Expect = max(s.Duration, ex.blockTime())
	return s
}

// beforeBlock waits where the caller lines blocks up (Options.BeforeBlock), logging a wait of 1 s or more.
func (ex *executor) beforeBlock(ctx context.Context, block int) {
	if ex.o.BeforeBlock == nil {
		return
	}
	start := time.Now()
	ex.o.BeforeBlock(ctx, block)
	if w := time.Since(start); w >= time.Second {
		logf(ex.o.Log, "synchronous block %d of %d: waited %v for the GPUs loaded beside this one to reach it", block, SyncBlocks, w.Round(100*time.Millisecond))
	}
}

// reserve is the time the synchronous blocks still to run are expected to take.
func (ex *executor) reserve() time.Duration { return time.Duration(ex.blocksLeft) * ex.blockTime() }

// blockTime is what a later synchronous block is expected to take: what the first took.
func (ex *executor) blockTime() time.Duration {
	if len(ex.blocks) == 0 {
		return time.Duration(ex.cfg.MaxDuration) / SyncBlocks
	}
	return time.Duration(ex.blocks[0].tookS * float64(time.Second))
}

// keepBlock keeps a synchronous block's samples (before its records' per-chunk data are freed).
func (ex *executor) keepBlock(o *rungOut, run results.Run) {
	b := syncBlock{run: run, startS: o.start.Seconds(), tookS: o.wall.Seconds()}
	for _, r := range o.recs {
		if r.Warmup || r.ramp || !r.ok() {
			continue
		}
		b.ttft = append(b.ttft, r.TTFTMs)
		b.itl = append(b.itl, r.ITLMs...)
		if r.OutputTokens > 1 {
			b.tpot = append(b.tpot, r.TPOTMs)
		}
		b.e2e = append(b.e2e, r.E2EMs)
		b.outTok = append(b.outTok, float64(r.OutputTokens))
	}
	ex.blocks = append(ex.blocks, b)
}

// poolBlocks folds the synchronous rung's later blocks into its first (pooled), when there are any.
func (ex *executor) poolBlocks(a *attempt) {
	blocks := ex.blocks
	ex.blocks = nil
	if len(blocks) < 2 {
		return
	}
	for i := range a.runs {
		if a.runs[i].Kind == kindSynchronous {
			a.runs[i] = pooled(blocks, uint64(ex.cfg.Seed), ex.cfg.MinSamples)
			return
		}
	}
}

// pooled is one run of the blocks together.
func pooled(blocks []syncBlock, seed uint64, minSamples int) results.Run {
	run := blocks[0].run
	var ttft, itl, tpot, e2e, outTok []float64
	var win, outTokS, reqS, totTokS, good float64
	run.Requests, run.Errors, run.ErrorSamples = results.RequestCounts{}, map[string]int{}, nil
	run.Repeat = &results.Repeat{Blocks: len(blocks)}
	for _, b := range blocks {
		run.Repeat.StartS = append(run.Repeat.StartS, b.startS)
		run.Repeat.WindowStartS = append(run.Repeat.WindowStartS, b.run.WindowStartS)
		run.Repeat.WindowSeconds = append(run.Repeat.WindowSeconds, b.run.WindowSeconds)
		ttft, itl, tpot = append(ttft, b.ttft...), append(itl, b.itl...), append(tpot, b.tpot...)
		e2e, outTok = append(e2e, b.e2e...), append(outTok, b.outTok...)
		r := b.run
		w := r.WindowSeconds
		win += w
		outTokS, reqS, totTokS = outTokS+r.OutputTokS*w, reqS+r.ReqS*w, totTokS+r.TotalTokS*w
		if r.Goodput != nil {
			good += *r.Goodput * w
		}
		run.Requests.Successful += r.Requests.Successful
		run.Requests.Errored += r.Requests.Errored
		run.Requests.Incomplete += r.Requests.Incomplete
		run.Requests.Warmup += r.Requests.Warmup
		run.Requests.Streamed += r.Requests.Streamed
		for k, v := range r.Errors {
			run.Errors[k] += v
		}
		if r.ClientLimited && !run.ClientLimited {
			run.ClientLimited, run.ClientReason = true, r.ClientReason
		}
		if r.Busy != "" && run.Busy == "" {
			run.Busy = r.Busy
		}
		run.ErrorSamples = append(run.ErrorSamples, r.ErrorSamples...)
	}
	if len(run.Errors) == 0 {
		run.Errors = nil
	}
	run.TTFT, run.ITL, run.TPOT, run.E2E = metrics.Summarize(ttft), metrics.Summarize(itl), metrics.Summarize(tpot), metrics.Summarize(e2e)
	run.MeanOutputTokens = metrics.MeanStat(outTok)
	if win > 0 {
		run.WindowSeconds, run.OutputTokS, run.ReqS, run.TotalTokS = win, outTokS/win, reqS/win, totTokS/win
		if run.Goodput != nil {
			g := good / win
			run.Goodput = &g
		}
	}
	run.Sizing = pooledSizing(blocks, minSamples)
	run.CI = intervals(ttft, itl, tpot, nil, 0, seed+uint64(run.Concurrency))
	run.Repeat.CI = repeatIntervals(&run, blocks, run.CI)
	return run
}

// blockFigures are the synchronous rung's gated figures, by their Intervals key.
var blockFigures = []struct {
	key   string
	value func(r *results.Run) float64
}{
	{"ttft_p95_ms", func(r *results.Run) float64 { return r.TTFT.P95 }},
	{"ttft_p99_ms", func(r *results.Run) float64 { return r.TTFT.P99 }},
	{"itl_p95_ms", func(r *results.Run) float64 { return r.ITL.P95 }},
	{"tpot_p95_ms", func(r *results.Run) float64 { return r.TPOT.P95 }},
	{"tpot_p50_ms", func(r *results.Run) float64 { return r.TPOT.P50 }},
	{"output_tok_s", func(r *results.Run) float64 { return r.OutputTokS }},
}

// repeatIntervals records each figure's block values in run.Repeat and returns the run's intervals:
// the bootstrap over the pooled requests (within) widened to the batch means over the blocks. A
// figure with no interval over its requests gets none: three blocks of a handful say little of a tail.
func repeatIntervals(run *results.Run, blocks []syncBlock, within *results.Intervals) *results.Intervals {
	out := &results.Intervals{}
	if within != nil {
		*out = *within
	}
	any := false
	for _, f := range blockFigures {
		center := f.value(run)
		vals := make([]float64, len(blocks))
		for i := range blocks {
			vals[i] = f.value(&blocks[i].run)
		}
		if !(center > 0) {
			continue
		}
		run.Repeat.Figures = append(run.Repeat.Figures, results.FigureRepeat{Figure: f.key, Blocks: vals, SpreadPct: metrics.SpreadPct(center, vals)})
		// Output tok/s has no interval over requests at concurrency 1; the blocks give one.
		ci := out.Ref(f.key)
		if *ci != nil || f.key == "output_tok_s" {
			*ci = metrics.Union(*ci, metrics.BatchMeans(center, vals))
		}
		any = any || *ci != nil
	}
	if !any {
		return nil
	}
	return out
}

// pooledSizing is the blocks' sizing together: their completions against compare.min_samples.
func pooledSizing(blocks []syncBlock, minSamples int) *results.RungSizing {
	first := blocks[0].run.Sizing
	if first == nil {
		return nil
	}
	z := *first
	z.Completed, z.ShortRequests, z.MinSamples = 0, 0, minSamples
	for _, b := range blocks {
		if s := b.run.Sizing; s != nil {
			z.Completed += s.Completed
			z.ShortRequests += s.ShortRequests
			z.ShortOutputTokens = max(z.ShortOutputTokens, s.ShortOutputTokens)
		}
	}
	z.Cut = z.Completed < minSamples
	z.Reason = fmt.Sprintf("ran in %d blocks spread over the load (before the probes, before the ladder, after it) until %d requests completed (compare.min_samples %d)",
		len(blocks), z.Completed, minSamples)
	switch {
	case z.Cut && blockEndedBy(blocks, EndedByInterrupted):
		z.Reason = fmt.Sprintf("interrupted in its %d blocks with %d of %d requests completed", len(blocks), z.Completed, minSamples)
	case z.Cut && blockEndedBy(blocks, EndedByErrors):
		z.Reason = fmt.Sprintf("stopped by its errors in %d blocks with %d of the %d completed requests compare.min_samples asks for", len(blocks), z.Completed, minSamples)
	case z.Cut:
		z.Reason = fmt.Sprintf("cut by load.max_rung_duration in %d blocks with %d of the %d completed requests compare.min_samples asks for: its latency figures are inconclusive; raise load.max_rung_duration, or shorten load.output_tokens",
			len(blocks), z.Completed, minSamples)
	}
	return &z
}

// blockEndedBy reports whether a block was ended by bound (the pooled rung's cut is then that).
func blockEndedBy(blocks []syncBlock, bound string) bool {
	return slices.ContainsFunc(blocks, func(b syncBlock) bool { return b.run.EndedBy == bound })
}

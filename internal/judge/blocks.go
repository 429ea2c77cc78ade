package judge

import (
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// alignedBlocks are figure's values in each block of every load's synchronous rung, when the loads ran
// side by side (sharedClient) and each block ran at the same time on all: GPU to GPU then takes its
// gaps block by block (compare.Figure.Blocks), free of what drifted for all. nil when a load's blocks
// are missing, differ in number or ran apart.
func alignedBlocks(loads []*results.Load, figure string, sharedClient bool) [][]float64 {
	if !sharedClient || len(loads) < 2 {
		return nil
	}
	out := make([][]float64, len(loads))
	reps := make([]*results.Repeat, len(loads))
	for i, l := range loads {
		rep, vals := syncBlocks(l, figure)
		if vals == nil || len(vals) != len(rep.WindowStartS) || len(vals) != len(rep.WindowSeconds) || (i > 0 && len(vals) != len(out[0])) {
			return nil
		}
		out[i], reps[i] = vals, rep
	}
	for j := range out[0] {
		if !together(loads, reps, j) {
			return nil
		}
	}
	return out
}

// syncBlocks are load l's synchronous rung's blocks and figure's value in each (nil: none).
func syncBlocks(l *results.Load, figure string) (*results.Repeat, []float64) {
	r := FindRun(l, RunSynchronous)
	if r == nil || r.Repeat == nil || l.StartedAt.IsZero() {
		return nil, nil
	}
	if fr := r.Repeat.Figure(figure); fr != nil && len(fr.Blocks) > 0 {
		return r.Repeat, fr.Blocks
	}
	return nil, nil
}

// together tells whether block j of every load ran at the same time: their measuring windows
// overlap by at least half the shortest of them.
func together(loads []*results.Load, reps []*results.Repeat, j int) bool {
	var lo, hi time.Time
	shortest := time.Duration(1<<63 - 1)
	for i, l := range loads {
		start := l.StartedAt.Add(seconds(reps[i].WindowStartS[j]))
		w := seconds(reps[i].WindowSeconds[j])
		if end := start.Add(w); i == 0 || end.Before(hi) {
			hi = end
		}
		if i == 0 || start.After(lo) {
			lo = start
		}
		shortest = min(shortest, w)
	}
	return shortest > 0 && hi.Sub(lo) >= shortest/2
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

package judge

import (
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// alignedBlocks are figure's values in each block of the synchronous rung of every load, when the
// loads ran side by side (sharedClient) and each block ran at the same time on all of them: block
// j's measuring windows overlap by at least half the shortest of them. The GPU-to-GPU comparison
// then takes its gaps block by block (compare.Figure.Blocks), free of what drifted for all of them.
// nil when any load's blocks are missing, differ in number or ran apart (a load that waited past
// its bound for the others).
func alignedBlocks(loads []*results.Load, figure string, sharedClient bool) [][]float64 {
	if !sharedClient || len(loads) < 2 {
		return nil
	}
	out := make([][]float64, len(loads))
	var reps []*results.Repeat
	for i, l := range loads {
		r := FindRun(l, RunSynchronous)
		if r == nil || r.Repeat == nil || l.StartedAt.IsZero() {
			return nil
		}
		fr := r.Repeat.Figure(figure)
		if fr == nil {
			return nil
		}
		k := len(fr.Blocks)
		if k == 0 || len(r.Repeat.WindowStartS) != k || len(r.Repeat.WindowSeconds) != k || (i > 0 && k != len(out[0])) {
			return nil
		}
		out[i], reps = fr.Blocks, append(reps, r.Repeat)
	}
	for j := range out[0] {
		var lo, hi time.Time
		shortest := time.Duration(1<<63 - 1)
		for i, l := range loads {
			start := l.StartedAt.Add(seconds(reps[i].WindowStartS[j]))
			w := seconds(reps[i].WindowSeconds[j])
			end := start.Add(w)
			if i == 0 || start.After(lo) {
				lo = start
			}
			if i == 0 || end.Before(hi) {
				hi = end
			}
			shortest = min(shortest, w)
		}
		if !(shortest > 0) || hi.Sub(lo) < shortest/2 {
			return nil
		}
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

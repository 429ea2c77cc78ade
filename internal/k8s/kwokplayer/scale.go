package kwokplayer

import (
	"hash/fnv"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ScaleLoad makes a recorded load the same measurement on a server f times slower: every latency
// (TTFT, ITL, TPOT, end to end, their intervals) × f, every rate (tokens and requests a second,
// the sweep's rungs and target rates, their intervals) ÷ f. Counts, windows and what the client
// measured of itself (its lag, its CPU) stay as recorded.
func ScaleLoad(l *results.Load, f float64) {
	if l == nil || f == 1 || f <= 0 {
		return
	}
	r := 1 / f
	mul(r, &l.PeakOutputTokS, &l.SustainedReqS, &l.BurstReqS)
	if s := l.Saturation; s != nil {
		mul(r, &s.Peak)
		for i := range s.Rungs {
			s.Rungs[i] *= r
		}
		if k := s.Knee; k != nil {
			mul(r, &k.LadderTopReqS)
			for i := range k.Probes {
				k.Probes[i].OutputTokS *= r
			}
		}
	}
	for i := range l.Runs {
		run := &l.Runs[i]
		for _, d := range []*results.Dist{&run.TTFT, run.TTFTFromSchedule, &run.ITL, &run.TPOT, &run.E2E} {
			if d != nil {
				mul(f, &d.Mean, &d.Min, &d.Max, &d.P50, &d.P90, &d.P95, &d.P99)
			}
		}
		mul(r, &run.OutputTokS, &run.TotalTokS, &run.ReqS, &run.TargetRate)
		if run.Goodput != nil {
			g := *run.Goodput * r
			run.Goodput = &g
		}
		if ci := run.CI; ci != nil {
			for _, iv := range []*results.Interval{ci.TTFTP95, ci.TTFTP99, ci.ITLP95, ci.TPOTP95, ci.TPOTP50} {
				scaleInterval(iv, f)
			}
			scaleInterval(ci.OutputTokS, r)
		}
	}
}

func scaleInterval(iv *results.Interval, f float64) {
	if iv != nil {
		mul(f, &iv.Lo, &iv.Hi)
	}
}

// mul multiplies each of vs by f.
func mul(f float64, vs ...*float64) {
	for _, v := range vs {
		*v *= f
	}
}

// spread is a number in [-1, 1) fixed by the node and what on it (a GPU's URL): the same run
// after run, different from node to node.
func spread(node, within string) float64 {
	h := fnv.New64a()
	h.Write([]byte(node + "\x00" + within))
	return float64(h.Sum64()%2000000)/1000000 - 1
}

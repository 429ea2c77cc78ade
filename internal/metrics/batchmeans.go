package metrics

import (
	"math"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Batch means (Law & Kelton, "Simulation Modeling and Analysis", ch. 9; Kalibera & Jones,
// "Rigorous Benchmarking in Reasonable Time", ISMM 2013): a figure measured in B independent blocks
// spread over a run varies between the blocks by what drifts over the run (the engine, the host),
// which the spread between one block's requests never shows. The blocks' values, as B samples of
// the figure, give an interval by Student's t with B − 1 degrees of freedom.

// studentT975 is Student's t 0.975 quantile for 1..10 degrees of freedom (two-sided 95 %).
var studentT975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228}

// StudentT975 is Student's t 0.975 quantile for df degrees of freedom (0 outside 1..10).
func StudentT975(df int) float64 {
	if df < 1 || df > len(studentT975) {
		return 0
	}
	return studentT975[df-1]
}

// BatchMeans is the 95 % interval centre ± t(B−1) × sd(blocks)/√B of a figure measured as
// center over the pooled samples and as blocks in each of B blocks (2 ≤ B ≤ 11): the spread the
// figure shows between blocks. nil with fewer than two blocks or a block that measured nothing.
func BatchMeans(center float64, blocks []float64) *results.Interval {
	b := len(blocks)
	if b < 2 || b > len(studentT975)+1 {
		return nil
	}
	if slices.ContainsFunc(blocks, func(v float64) bool { return !(v > 0) || math.IsInf(v, 0) }) {
		return nil
	}
	mean := MeanStat(blocks)
	var ss float64
	for _, v := range blocks {
		ss += (v - mean) * (v - mean)
	}
	half := StudentT975(b-1) * math.Sqrt(ss/float64(b-1)) / math.Sqrt(float64(b))
	return &results.Interval{Lo: max(center-half, 0), Hi: center + half, Level: 0.95}
}

// Union is the smallest interval holding both (either may be nil).
func Union(a, b *results.Interval) *results.Interval {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return &results.Interval{Lo: min(a.Lo, b.Lo), Hi: max(a.Hi, b.Hi), Level: a.Level}
}

// SpreadPct is how far a figure's block values spread, as a share of center: (max − min)/center ×
// 100 over the blocks that measured it (a positive, finite value, as BatchMeans takes); 0 with fewer
// than two such blocks.
func SpreadPct(center float64, blocks []float64) float64 {
	if !(center > 0) {
		return 0
	}
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, v := range blocks {
		if !(v > 0) || math.IsInf(v, 0) {
			continue
		}
		lo, hi, n = min(lo, v), max(hi, v), n+1
	}
	if n < 2 {
		return 0
	}
	return (hi - lo) / center * 100
}

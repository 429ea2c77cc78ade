// Package metrics turns exact samples into the distributions gpuvet reports: exact percentiles with
// their sample counts, and bootstrap confidence intervals for the figures the verdicts gate on.
//
// Percentiles are exact (samples are kept and sorted), never estimated from a histogram: a run holds at
// most a few million samples, which sort in well under a second.
package metrics

import (
	"math"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted samples by linear interpolation between
// closest ranks (the definition numpy's default and vLLM's benchmark use), so figures line up with
// theirs. It returns 0 for no samples.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[n-1]
	}
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	hi := lo + 1
	if hi >= n {
		return sorted[n-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// Summarize returns the distribution of samples. It sorts a copy; the caller's slice is untouched.
// NaN and ±Inf samples are dropped (they can only come from a bug upstream and would poison the mean).
func Summarize(samples []float64) results.Dist {
	s := slices.DeleteFunc(slices.Clone(samples), func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
	slices.Sort(s)
	return SummarizeSorted(s)
}

// SummarizeSorted is Summarize for samples already sorted ascending and free of NaN/Inf.
func SummarizeSorted(s []float64) results.Dist {
	if len(s) == 0 {
		return results.Dist{}
	}
	return results.Dist{
		Count: len(s),
		Mean:  MeanStat(s),
		Min:   s[0],
		Max:   s[len(s)-1],
		P50:   Percentile(s, 0.50),
		P90:   Percentile(s, 0.90),
		P95:   Percentile(s, 0.95),
		P99:   Percentile(s, 0.99),
	}
}

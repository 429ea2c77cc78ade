package metrics

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// MinBootstrapSamples is the fewest samples a bootstrap interval is computed from: below it the
// interval would be a statement about a handful of points, so none is given.
const MinBootstrapSamples = 20

// Bootstrap returns a percentile-bootstrap confidence interval at level (e.g. 0.95) for stat over
// samples, from resamples resamplings drawn with a seeded generator (the same input gives the same
// interval). It returns nil when there are fewer than MinBootstrapSamples samples.
func Bootstrap(samples []float64, stat func([]float64) float64, level float64, resamples int, seed uint64) *results.Interval {
	n := len(samples)
	if !bootstrappable(n, level, resamples) {
		return nil
	}
	rng := newBootstrapRNG(seed)
	buf := make([]float64, n)
	stats := make([]float64, resamples)
	for r := range resamples {
		for i := range buf {
			buf[i] = samples[rng.IntN(n)]
		}
		stats[r] = stat(buf)
	}
	return interval(stats, level)
}

// MinQuantileSamples is the fewest samples that bound the q-quantile at level without assuming a
// distribution: the smallest n with max(q, 1−q)^n ≤ (1−level)/2, so that the sample's extremes lie
// beyond the quantile each with probability ≥ 1 − (1−level)/2. At 95 %: 6 for the median, 72 for
// the p95, 367 for the p99. With fewer, no resampling can reach past the few largest samples: a
// percentile-bootstrap interval of the p99 of 60 requests spans the top two or three of them, far
// narrower than the truth (one H200's TTFT p99 "differed" from its own repeat by 37 %, [29, 45] %).
func MinQuantileSamples(q, level float64) int {
	t := max(q, 1-q)
	if !(t < 1) || !(level > 0 && level < 1) {
		return math.MaxInt
	}
	return int(math.Ceil(math.Log((1-level)/2) / math.Log(t)))
}

// BootstrapQuantile is Bootstrap of the q-quantile (Percentile), in O(n) per resample instead of a
// sort: the samples are ranked once, each resample draws the same indexes Bootstrap would and only
// counts how often each rank was drawn, and the quantile's two neighbouring order statistics are
// read off the running count. The resample's multiset is the same, so the interval is identical,
// bit for bit.
// It returns nil when the samples are fewer than MinQuantileSamples(q, level) (or MinBootstrapSamples).
func BootstrapQuantile(samples []float64, q, level float64, resamples int, seed uint64) *results.Interval {
	n := len(samples)
	if !bootstrappable(n, level, resamples) || n < MinQuantileSamples(q, level) {
		return nil
	}
	order := make([]int32, n) // order[k]: index of the k-th smallest sample
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(samples[a], samples[b]) })
	sorted := make([]float64, n)
	rank := make([]int32, n)
	for k, i := range order {
		sorted[k], rank[i] = samples[i], int32(k)
	}
	rng := newBootstrapRNG(seed)
	counts := make([]int32, n)
	stats := make([]float64, resamples)
	for r := range resamples {
		clear(counts)
		for range n {
			counts[rank[rng.IntN(n)]]++
		}
		stats[r] = countedPercentile(sorted, counts, q)
	}
	return interval(stats, level)
}

// countedPercentile is Percentile of the sorted multiset holding sorted[k] counts[k] times (the counts
// sum to len(sorted)), with Percentile's arithmetic.
func countedPercentile(sorted []float64, counts []int32, q float64) float64 {
	n := len(sorted)
	switch {
	case q <= 0:
		return sorted[orderStat(counts, 0)]
	case q >= 1:
		return sorted[orderStat(counts, n-1)]
	}
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	if lo+1 >= n {
		return sorted[orderStat(counts, n-1)]
	}
	a, b := orderStat2(counts, lo)
	frac := pos - float64(lo)
	return sorted[a] + frac*(sorted[b]-sorted[a])
}

// orderStat returns the rank holding the j-th (0-based) smallest element of the counted multiset.
func orderStat(counts []int32, j int) int {
	a, _ := orderStat2(counts, j)
	return a
}

// orderStat2 returns the ranks holding the j-th and (j+1)-th smallest elements (the second is the last
// rank drawn when j is the largest).
func orderStat2(counts []int32, j int) (int, int) {
	cum, a := 0, -1
	for k, c := range counts {
		cum += int(c)
		if a < 0 && cum > j {
			a = k
		}
		if a >= 0 && cum > j+1 {
			return a, k
		}
	}
	return a, a
}

func bootstrappable(n int, level float64, resamples int) bool {
	return n >= MinBootstrapSamples && resamples >= 10 && level > 0 && level < 1
}

func newBootstrapRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// interval is the percentile interval of the resampled statistics (sorted in place).
func interval(stats []float64, level float64) *results.Interval {
	slices.Sort(stats)
	alpha := (1 - level) / 2
	return &results.Interval{Lo: Percentile(stats, alpha), Hi: Percentile(stats, 1-alpha), Level: level}
}

// MeanStat is the arithmetic mean, for bootstrap.
func MeanStat(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	return sum / float64(len(s))
}

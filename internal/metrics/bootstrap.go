package metrics

import (
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
	if n < MinBootstrapSamples || resamples < 10 || level <= 0 || level >= 1 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]float64, n)
	stats := make([]float64, resamples)
	for r := range resamples {
		for i := range buf {
			buf[i] = samples[rng.IntN(n)]
		}
		stats[r] = stat(buf)
	}
	slices.Sort(stats)
	alpha := (1 - level) / 2
	return &results.Interval{Lo: Percentile(stats, alpha), Hi: Percentile(stats, 1-alpha), Level: level}
}

// QuantileStat returns a statistic computing the q-quantile of (unsorted) samples; it sorts in place,
// which is fine for bootstrap resample buffers.
func QuantileStat(q float64) func([]float64) float64 {
	return func(s []float64) float64 {
		slices.Sort(s)
		return Percentile(s, q)
	}
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

package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// quantileStat is the q-quantile by sorting each resample, Bootstrap's statistic that
// BootstrapQuantile must reproduce; it sorts in place, which is fine for resample buffers.
func quantileStat(q float64) func([]float64) float64 {
	return func(s []float64) float64 {
		slices.Sort(s)
		return Percentile(s, q)
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct {
		q    float64
		want float64
	}{
		{0, 1}, {1, 10}, {0.5, 5.5}, {0.9, 9.1}, {0.99, 9.91}, {0.25, 3.25},
	}
	for _, c := range cases {
		if got := Percentile(s, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("empty: got %v", got)
	}
	if got := Percentile([]float64{7}, 0.99); got != 7 {
		t.Errorf("single: got %v", got)
	}
}

func TestSummarize(t *testing.T) {
	in := []float64{5, 1, math.NaN(), 3, math.Inf(1), 2, 4}
	d := Summarize(in)
	if d.Count != 5 || d.Min != 1 || d.Max != 5 || d.Mean != 3 || d.P50 != 3 {
		t.Fatalf("Summarize = %+v", d)
	}
	if in[0] != 5 {
		t.Fatal("Summarize reordered the caller's slice")
	}
	if z := Summarize(nil); z.Count != 0 {
		t.Fatalf("empty: %+v", z)
	}
}

func TestBootstrap(t *testing.T) {
	s := make([]float64, 1000)
	for i := range s {
		s[i] = float64(i % 100) // uniform 0..99: p95 ≈ 94
	}
	ci := Bootstrap(s, quantileStat(0.95), 0.95, 400, 1)
	if ci == nil {
		t.Fatal("no interval for 1000 samples")
	}
	if !(ci.Lo <= 94.05 && ci.Hi >= 93.95) || ci.Hi-ci.Lo > 10 || ci.Lo > ci.Hi {
		t.Fatalf("p95 interval %+v does not bracket ~94 tightly", ci)
	}
	again := Bootstrap(s, quantileStat(0.95), 0.95, 400, 1)
	if *again != *ci {
		t.Fatalf("same seed gave %+v then %+v", ci, again)
	}
	if Bootstrap(s[:5], MeanStat, 0.95, 400, 1) != nil {
		t.Fatal("interval from 5 samples")
	}
	m := Bootstrap(s, MeanStat, 0.95, 400, 2)
	if m.Lo > 49.5 || m.Hi < 49.5 {
		t.Fatalf("mean interval %+v misses 49.5", m)
	}
}

// BootstrapQuantile must give exactly the sort-based interval: same draws, same multiset, same figure.
func TestBootstrapQuantileIsTheSortedBootstrap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{20, 21, 57, 1000, 5003} {
		s := make([]float64, n)
		for i := range s {
			switch i % 3 {
			case 0:
				s[i] = rng.ExpFloat64() * 40
			case 1:
				s[i] = float64(rng.IntN(7)) // ties
			default:
				s[i] = rng.NormFloat64()
			}
		}
		for _, q := range []float64{0, 0.01, 0.5, 0.95, 0.99, 0.999, 1} {
			for _, seed := range []uint64{1, 99} {
				want := Bootstrap(s, quantileStat(q), 0.95, 50, seed)
				got := BootstrapQuantile(s, q, 0.95, 50, seed)
				if n < MinQuantileSamples(q, 0.95) {
					if got != nil {
						t.Fatalf("n=%d q=%v: interval %+v from fewer samples than bound the quantile", n, q, got)
					}
					continue
				}
				if *got != *want {
					t.Fatalf("n=%d q=%v seed=%d: ranked %+v, sorted %+v", n, q, seed, got, want)
				}
			}
		}
	}
	if BootstrapQuantile(make([]float64, 5), 0.5, 0.95, 50, 1) != nil {
		t.Fatal("interval from 5 samples")
	}
}

func benchSamples() []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	s := make([]float64, 20000)
	for i := range s {
		s[i] = rng.ExpFloat64()
	}
	return s
}

func BenchmarkBootstrapSorted(b *testing.B) {
	s := benchSamples()
	for b.Loop() {
		Bootstrap(s, quantileStat(0.95), 0.95, 200, 1)
	}
}

func BenchmarkBootstrapQuantile(b *testing.B) {
	s := benchSamples()
	for b.Loop() {
		BootstrapQuantile(s, 0.95, 0.95, 200, 1)
	}
}

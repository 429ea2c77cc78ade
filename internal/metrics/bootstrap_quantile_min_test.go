package metrics

import (
	"math"
	"testing"
)

func TestMinQuantileSamples(t *testing.T) {
	for _, c := range []struct {
		q    float64
		want int
	}{{0.5, 6}, {0.95, 72}, {0.99, 368}, {0.05, 72}} {
		if got := MinQuantileSamples(c.q, 0.95); got != c.want {
			t.Errorf("MinQuantileSamples(%g, 0.95) = %d, want %d", c.q, got, c.want)
		}
		// The definition: the smallest n with max(q,1-q)^n ≤ 0.025.
		n := MinQuantileSamples(c.q, 0.95)
		p := max(c.q, 1-c.q)
		if !(math.Pow(p, float64(n)) <= 0.025 && math.Pow(p, float64(n-1)) > 0.025) {
			t.Errorf("q=%g: n=%d is not the smallest n with %g^n ≤ 0.025", c.q, n, p)
		}
	}
}

// A tail quantile of too few samples gets no interval: the bootstrap's would span only the top few
// samples. Two draws of the same distribution must then not look different.
func TestBootstrapQuantileTooFewForTail(t *testing.T) {
	s := make([]float64, 60)
	for i := range s {
		s[i] = float64(i)
	}
	if ci := BootstrapQuantile(s, 0.99, 0.95, 1000, 1); ci != nil {
		t.Errorf("p99 of 60 samples: interval %+v, want none (368 needed)", ci)
	}
	if ci := BootstrapQuantile(s, 0.5, 0.95, 1000, 1); ci == nil {
		t.Error("median of 60 samples: no interval")
	}
	s = make([]float64, 400)
	for i := range s {
		s[i] = float64(i)
	}
	if ci := BootstrapQuantile(s, 0.99, 0.95, 1000, 1); ci == nil {
		t.Error("p99 of 400 samples: no interval")
	}
}

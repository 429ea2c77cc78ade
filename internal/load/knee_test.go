package load

import (
	"math/rand/v2"
	"testing"
)

func TestSteady(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	flat := make([]float64, 40)
	ramp := make([]float64, 40)
	for i := range flat {
		flat[i] = 1000 * (1 + 0.03*rng.NormFloat64())
		ramp[i] = 500 + 25*float64(i)
	}
	if m, ok := steady(flat); !ok || m < 950 || m > 1050 {
		t.Errorf("a flat rate with 3%% noise: steady=%v mean %.0f", ok, m)
	}
	if _, ok := steady(ramp); ok {
		t.Error("a climbing rate was called steady")
	}
	noisy := make([]float64, 16)
	for i := range noisy {
		noisy[i] = 1000 * (1 + 0.5*rng.NormFloat64())
	}
	if _, ok := steady(noisy); ok {
		t.Error("a rate with 50% noise over 16 slices was called steady")
	}
	if _, ok := steady(make([]float64, 20)); ok {
		t.Error("no output was called steady")
	}
}

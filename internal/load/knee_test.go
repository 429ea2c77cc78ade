package load

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPlateau(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 80
	flat, infl := make([]float64, n), make([]float64, n)
	rampRate, rampInfl := make([]float64, n), make([]float64, n)
	stepRate, stepInfl := make([]float64, n), make([]float64, n)
	for i := range n {
		flat[i], infl[i] = 1000*(1+0.03*rng.NormFloat64()), 32
		// An open loop on a slow engine: nothing completes yet, so the in-flight count and the
		// output rate climb through the whole rung (the H200's 20 s constant rungs).
		rampRate[i], rampInfl[i] = 50+10*float64(i), 1+0.3*float64(i)
		// A ramp of 20 slices, then flat.
		stepRate[i], stepInfl[i] = 1000*(1+0.02*rng.NormFloat64()), 32
		if i < 20 {
			stepRate[i], stepInfl[i] = 50*float64(i), 1.6*float64(i)
		}
	}
	if on, _, why := plateau(flat, infl, levelSlice); on != 0 {
		t.Errorf("flat: onset %d (%s), want 0", on, why)
	}
	if on, _, why := plateau(rampRate, rampInfl, levelSlice); on >= 0 || !strings.Contains(why, "in-flight count went") {
		t.Errorf("a climbing ramp levelled at slice %d (%q)", on, why)
	}
	// The onset may take in the ramp's last slices (within levelDrift of the level), not more.
	if on, _, why := plateau(stepRate, stepInfl, levelSlice); on < 15 || on > 24 {
		t.Errorf("ramp then flat: onset at slice %d (%s), want 15..24", on, why)
	}
	if on, _, _ := plateau(make([]float64, n), infl, levelSlice); on >= 0 {
		t.Error("no output was called level")
	}
	if on, _, _ := plateau(flat[:levelMinSlices-1], infl[:levelMinSlices-1], levelSlice); on >= 0 {
		t.Error("a plateau shorter than levelMinSlices")
	}
	// Small in-flight counts move by one request as they come and go: still level.
	small := make([]float64, n)
	for i := range small {
		small[i] = float64(2 + i%2)
	}
	if on, _, why := plateau(flat, small, levelSlice); on != 0 {
		t.Errorf("in flight 2..3: onset %d (%s)", on, why)
	}
	// Past capacity: the rate flat at the engine's capacity while the queue grows.
	queue := make([]float64, n)
	for i := range queue {
		queue[i] = 10 + 0.5*float64(i)
	}
	if on, q, why := plateau(flat, queue, levelSlice); on != 0 || !q {
		t.Errorf("a flat rate with a growing queue: onset %d queue %v (%s), want a queue from the start", on, q, why)
	}
	if _, q, _ := plateau(stepRate, stepInfl, levelSlice); q {
		t.Error("a ramp that levels was called a queue")
	}
	if _, ci := meanCI(flat); ci > levelCI {
		t.Errorf("a 3%% noisy flat rate over %d slices: ±%.1f%%", n, 100*ci)
	}
}

func TestErrorsDecide(t *testing.T) {
	cases := []struct {
		good, bad, slots int
		stop             bool
	}{
		{0, 19, 8, false},   // too few to decide
		{0, 20, 8, true},    // all failed
		{0, 20, 64, false},  // a wide first wave: one failure per slot first
		{0, 64, 64, true},   //
		{1, 19, 1, false},   //
		{5, 45, 8, true},    // 90 % fail, with confidence
		{45, 55, 8, false},  // 55 % fail, the interval still reaches below half
		{100, 20, 8, false}, // a few errors among many successes: the error gate's business
	}
	for _, c := range cases {
		if got := errorsDecide(c.good, c.bad, c.slots) != ""; got != c.stop {
			t.Errorf("good %d bad %d slots %d: stop %v, want %v", c.good, c.bad, c.slots, got, c.stop)
		}
	}
}
